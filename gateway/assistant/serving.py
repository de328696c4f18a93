"""``/v1/assistant``: sessions whose turns search, call tools on the server and answer from what they returned.

One turn (``POST /v1/assistant/sessions/{id}/messages``, SSE):

1. the model sees the assistant's instructions, the session's last ``history_turns`` turns and the
   message, with the session's tools; it either replies (``delta`` events) or calls one tool, its
   arguments checked by the reasoning service as on ``/v1/chat/completions`` (schema, Korean amounts
   and dates by code, ungrounded calls refused). Code then checks the choice: a date task for a message
   naming no date or time is refused (``tool_refused``) and the model asked again without it. A direct
   reply to a message that asks for information (services/runtime/korean/questions.py) while the
   session may search is kept when what the session already holds supports it (an earlier tool result
   or checked answer: gateway/assistant/held.py) or when the documents are about something else (no word
   of the message in what a search finds, and the relevance decision says they cannot answer: "오늘 저녁
   뭐 먹지?"); otherwise it becomes a search (``tool_call`` with ``"by": "code"``): that reply would be
   facts no code checked;
2. ``tool_call`` names the call; the server runs it:
   - ``search``: the grounded-answer code over the session's first collection (``/v1/answers``: evidence
     sentences, numbers, abstention): ``tool_result`` then ``answer`` with the checked text and its
     citations, never streamed before the check; a question the documents do not answer is refused.
     The checked answer ends the turn;
   - a declared task (``calendar_parse``, ``resume_analysis`` …) or a backend tool: ``tool_result`` (a
     summary, not a large payload), then the model again with the result: another tool (at most
     ``tool_rounds`` a turn; the same call twice is not run again) or its reply (``delta`` events);
3. ``done`` with the turn's usage, timings and ``answered_from`` (``search``: a checked answer; ``tool``:
   the model's reply after a tool; ``session``: a reply code found in the session's earlier results;
   ``model``: a reply no document was needed for); or ``error`` (the ErrorBody shape). A failed tool is
   shown to the model once (``tool_result`` with ``error``), which then replies without tools, and
   the turn ends with the ``error`` event.

The turn is kept in the sessions store (its number claimed once, as interview turns are), at most
``max_turns`` of them per session, with its evidence (the tool's result or the checked answer's
sentences, :mod:`gateway.assistant.held`): the model sees the latest turns' evidence as the tool results
they were, and a follow-up search is rewritten with the earlier turns and their results.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from clients.errors import MeshClientError
from clients.reasoning import ChatMessage, Delta, Done, Options, StreamError, Tool, ToolCall, ToolCalls
from gateway.access.context import owner, require_read
from gateway.access.keys import ANONYMOUS
from gateway.answers import protocol as answers_api
from gateway.answers.serving import Answers, Prepared, Served
from gateway.assistant import calls, held
from gateway.assistant import protocol as api
from gateway.assistant.backend_tools import BackendTools, ToolError
from gateway.assistant.calls import (
    BrokenCall,
    OtherScript,
    model_parameters,
    summary,
    writes_korean,
)
from gateway.assistant.sessions import SessionStore, unavailable
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, from_client_error
from gateway.http.streams import TextDelta
from gateway.reasoning.events import usage_of
from gateway.reasoning.protocol import LlmUsage
from gateway.reasoning.routes import ModelRoutes
from gateway.tasks.protocol import TaskRequest
from gateway.tasks.serving import Tasks
from gateway.tasks.store import KeyValue, StoreUnavailable
from services.runtime.korean.questions import asks
from services.runtime.tasks.post import DEFAULT_TIMEZONE

log = logging.getLogger(__name__)
SYSTEM = ("당신은 한국어 취업·커리어 도우미입니다. 도구가 필요하면 도구 하나를 부르고, 필요 없으면 짧고 따뜻하게 직접 "
          "답합니다. 정보에 없는 사실은 지어내지 않습니다.\n"
          "- 회사, 채용 절차, 복지, 이력서·면접·연봉 요령을 묻는 질문: search\n"
          "- 날짜나 시간이 있는 일정을 등록해 달라는 말: calendar_parse\n"
          "- 이력서와 공고를 함께 주며 분석해 달라는 말: resume_analysis\n"
          "- 채용 공고를 찾아 달라는 말: 공고 검색 도구\n"
          "- 앞에서 찾은 결과나 답에 이미 있는 것을 다시 묻는 말: 도구 없이 그 결과로 답합니다.\n"
          "- 인사, 감사, 감정 이야기: 도구 없이 직접 답합니다.")
SEARCH = Tool("search", "회사 정보, 채용 절차, 복지, 이력서·면접·연봉 협상 요령 문서에서 질문의 답을 찾습니다.",
              {"type": "object", "additionalProperties": False, "required": ["query"],
               "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500}}})
INTERNAL_TASKS = ("interview_question", "spec_delta")  # the interview and conversation sessions' own steps
REFUSAL = "찾은 문서에서는 그 답을 확인할 수 없습니다."
# A reply in another script than the person's ("You're welcome!" to "고마워!"): asked again once with this
# note; a second one is replaced by this line (code cannot write the reply, only refuse the wrong one).
KOREAN_NOTE = "\n사용자는 한국어로 말했습니다. 반드시 한국어로 답하세요."
KOREAN_FALLBACK = "네, 알겠습니다. 더 도와드릴 일이 있으면 말씀해 주세요."


class Assistant(SessionStore):
    """Assistant sessions on the model routes, the grounded-answer code, the declared tasks and backend tools."""

    def __init__(self, routes: ModelRoutes, answers: Answers, tasks: Tasks, store: KeyValue, *, ttl_s: int,
                 backend: BackendTools | None = None, history_turns: int = 5, max_turns: int = 50,
                 tool_rounds: int = 3) -> None:
        super().__init__(store, ttl_s=ttl_s, max_turns=max_turns)
        self.routes, self.answers, self.tasks = routes, answers, tasks
        self.backend = backend
        self.history_turns = history_turns  # in the prompt: bounds each turn's input tokens
        self.tool_rounds = tool_rounds  # tools run one after another in a turn before the model must reply

    def available(self) -> dict[str, Tool]:
        """Every tool a session may be given."""
        out = {SEARCH.name: SEARCH}
        for name, task in self.tasks.tasks.items():
            if name not in INTERNAL_TASKS:
                out[name] = Tool(name, task.spec.description, model_parameters(task.spec.input_schema))
        for name, tool in (self.backend.tools if self.backend else {}).items():
            out[name] = Tool(name, tool.description, tool.parameters)
        return out

    async def start(self, body: api.StartSession, deadline: Deadline) -> api.SessionState:
        """A new session (400 naming an unknown tool, 404 for an unknown collection or model route)."""
        available = self.available()
        tools = list(available) if body.tools is None else body.tools
        unknown = [t for t in tools if t not in available]
        if unknown:
            why = f"unknown tools {unknown}; available: {sorted(available)}"
            raise ApiError(400, "invalid_argument", why, fields=[FieldError(field="tools", description=why)])
        if "search" in tools and not body.collections:
            why = "the search tool needs at least one collection"
            raise ApiError(400, "invalid_argument", why, fields=[FieldError(field="collections", description=why)])
        self.routes.get(body.model)
        for name in body.collections:
            require_read(name)
            try:
                await self.answers.search.retrieval.get_collection(name, timeout_s=deadline.check())
            except MeshClientError as err:
                raise from_client_error(err) from None
        sid = uuid.uuid4().hex
        meta = {"collections": body.collections, "tools": tools, "system": body.system, "model": body.model,
                "caller": body.caller, "reference_date": body.reference_date, "owner": owner(),
                "timezone": body.timezone or DEFAULT_TIMEZONE}
        try:
            await self.store.hsetnx(self.key(sid), "meta", json.dumps(meta, ensure_ascii=False), self.ttl_s)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        return api.SessionState(id=sid, collections=body.collections, tools=tools, model=body.model, turns=[],
                                expires_in_s=self.ttl_s, timezone=meta["timezone"])

    def _messages(self, meta: dict, turns: dict[int, dict], text: str) -> list[ChatMessage]:
        """The instructions, the last turns (the latest evidence as the tool results they were), the message."""
        system = SYSTEM + (f"\n{meta['system']}" if meta["system"] else "")
        out = [ChatMessage("system", system)]
        shown = [k for k in sorted(turns) if turns[k].get("evidence")][-held.EVIDENCE_TURNS:]
        for n in sorted(turns)[-self.history_turns:]:
            turn = turns[n]
            out.append(ChatMessage("user", turn["text"]))
            if n in shown and turn.get("tool"):
                call = ToolCall(f"t{n}", turn["tool"], json.dumps(turn.get("arguments") or {}, ensure_ascii=False))
                out += [ChatMessage("assistant", tool_calls=(call,)),
                        ChatMessage("tool", turn["evidence"], tool_call_id=call.id, name=call.name)]
            out.append(ChatMessage("assistant", turn["reply"]))
        return [*out, ChatMessage("user", text)]

    async def session(self, sid: str) -> tuple[dict, dict[int, dict]]:
        """The session a message goes to (404 before any event when there is none): its meta and turns."""
        return await self._load(sid)

    async def turn(self, sid: str, session: tuple[dict, dict[int, dict]], body: api.Message,
                   deadline: Deadline) -> AsyncGenerator[bytes, None]:
        """One turn's events (see the module doc)."""
        start = time.perf_counter()
        meta, turns = session
        available = self.available()
        offered = [available[t] for t in meta["tools"] if t in available]
        convo = self._messages(meta, turns, body.text)
        record: dict[str, Any] = {"text": body.text, "tool": None, "arguments": None, "reply": "", "citations": [],
                                  "calls": [], "evidence": "", "answered_from": "model"}
        prepared: Prepared | Served | None = None  # the search code prepared to decide on a reply
        usage: list[Any] = []
        timings: dict[str, float] = {}
        seen: set[str] = set()  # calls already run this turn (tool + canonical arguments)
        failed: ApiError | None = None
        repeated = False
        korean = writes_korean(body.text)
        try:
            for round_ in range(self.tool_rounds + 1):
                tools = [] if failed or repeated or round_ == self.tool_rounds else offered
                # A reply code may yet replace by a search is held until code has decided; any other streams.
                hold = round_ == 0 and any(t.name == SEARCH.name for t in tools) and asks(body.text)
                call: ToolCall | None = None
                pieces: list[str] = []
                for _ in range(2):  # a call code refutes is asked again once, without that tool
                    for script_try in range(2):  # a reply begun in another script: asked again once
                        pieces = []
                        try:
                            async for event in self._complete(meta, sid, convo, tools, deadline, usage, hold,
                                                              korean):
                                if isinstance(event, ToolCalls):
                                    call = event.calls[0]
                                elif hold:
                                    pieces.append(event)
                                else:
                                    record["reply"] += event
                                    yield api.STREAM.send("delta", TextDelta(text=event))
                            break
                        except BrokenCall as broke:  # nothing of it was sent
                            log.info("assistant tool call broken twice: %s", broke.args[0][:120])
                            call, pieces = None, []
                            if script_try or not tools:
                                raise ApiError(502, "invalid_output", f"the model's call broke its schema "
                                                                      f"({broke.args[0]})"[:300], retryable=True) \
                                    from None
                            tools = [t for t in tools if t.name == SEARCH.name or t.name not in self.tasks.tasks]
                        except OtherScript as began:  # nothing of it was sent
                            log.info("assistant reply in another script than the person's: %r", began.args[0])
                            call = None
                            if script_try:  # twice: code's line instead (it cannot write the reply, only refuse)
                                pieces, hold = [KOREAN_FALLBACK], True
                            else:
                                convo = [ChatMessage("system", (convo[0].content or "") + KOREAN_NOTE), *convo[1:]]
                    refuted = self._refuted(call, body.text) if call is not None else None
                    if refuted is None:
                        break
                    yield api.STREAM.send("tool_refused", api.ToolRefused(name=refuted[0], reason=refuted[1]))
                    offered = tools = [t for t in tools if t.name != refuted[0]]
                    call = None
                timings.setdefault("first_call_ms", round((time.perf_counter() - start) * 1e3, 1))
                by = "model"
                if call is None and round_ == 0 and any(t.name == SEARCH.name for t in tools) and asks(body.text):
                    # A question answered from the model's memory is an answer no code has checked: kept when
                    # the session's earlier results hold it or the documents are about something else, else
                    # searched.
                    why = record["session_check"] = held.check("".join(pieces), body.text, held.latest(turns))
                    if why is None:
                        record["answered_from"] = "session"
                    else:
                        prepared = await self._prepare(meta, turns, body.text, deadline)
                        if self._about_documents(prepared, body.text):
                            call, by = ToolCall("code_" + uuid.uuid4().hex[:12], SEARCH.name,
                                                json.dumps({"query": body.text[:500]}, ensure_ascii=False)), "code"
                if call is not None and self._canonical(call) in seen:
                    repeated = True  # the same call again: its result is in the conversation; now the reply
                    continue
                if call is None:
                    for piece in pieces:
                        record["reply"] += piece
                        yield api.STREAM.send("delta", TextDelta(text=piece))
                    break
                seen.add(self._canonical(call))
                offered = [t for t in offered if t.name != call.name]  # a tool once a turn: the small model repeats
                arguments = self._inputs(meta, call.name, json.loads(call.arguments or "{}"), body.text)
                record["tool"], record["arguments"] = call.name, arguments
                record["calls"].append(call.name)
                yield api.STREAM.send("tool_call", api.ToolCallEvent(name=call.name, arguments=arguments, by=by))
                t = time.perf_counter()
                if call.name == SEARCH.name:
                    if prepared is None:
                        prepared = await self._prepare(meta, turns, body.text, deadline)
                    out = await self.answers.finish(prepared, deadline)
                    timings["tool_ms"] = timings.get("tool_ms", 0.0) + round((time.perf_counter() - t) * 1e3, 1)
                    yield api.STREAM.send("tool_result", api.ToolResultEvent(
                        name=call.name, summary=f"{len(out.passages)} passages; {out.reason}", cached=False,
                        query=out.rewrite.query))
                    record["reply"] = out.answer if out.answerable else REFUSAL
                    record["citations"] = list(dict.fromkeys(c.id for c in out.citations))
                    record["answered_from"] = "search"
                    if out.answerable:
                        record["evidence"] = held.of_answer(out.answer, [c.text for c in out.citations])
                    if out.usage is not None:
                        usage.append(out.usage)
                    yield api.STREAM.send("answer", api.AnswerEvent(
                        text=record["reply"], answerable=out.answerable, reason=out.reason,
                        check=out.support.check if out.support else None, citations=out.citations))
                    break  # a checked answer is the turn's reply
                try:
                    result, cached = await self._tool(meta, sid, call.name, arguments, deadline)
                    shown = summary(result)
                    record["evidence"] = (record["evidence"] + "\n" + held.of_result(result)).strip()[
                        -held.EVIDENCE_CHARS:]
                    record["answered_from"] = "tool"
                    yield api.STREAM.send("tool_result", api.ToolResultEvent(name=call.name, summary=shown,
                                                                             cached=cached))
                except ToolError as err:
                    # shown to the model once; its reply, then the error ends the turn
                    failed = ApiError(502, "tool_failed", err.message, retryable=err.kind in ("timeout", "http"))
                    shown = f"error: {err.message}"
                    yield api.STREAM.send("tool_result", api.ToolResultEvent(name=call.name, error=err.message,
                                                                             cached=False))
                timings["tool_ms"] = timings.get("tool_ms", 0.0) + round((time.perf_counter() - t) * 1e3, 1)
                convo = [*convo, ChatMessage("assistant", tool_calls=(call,)),
                         ChatMessage("tool", shown, tool_call_id=call.id, name=call.name)]
            number = await self._keep(sid, turns, record)
            if failed:
                raise failed
        except ApiError as err:
            yield api.STREAM.error(err)
            return
        except MeshClientError as err:
            yield api.STREAM.error(err)
            return
        timings["turn_ms"] = round((time.perf_counter() - start) * 1e3, 1)
        yield api.STREAM.send("done", api.TurnDone(
            turn=number, tool=record["tool"], calls=record["calls"], answered_from=record["answered_from"],
            session_check=record.get("session_check"),
            usage=[u if isinstance(u, LlmUsage) else LlmUsage.model_validate(u) for u in usage], timings=timings))

    @staticmethod
    def _canonical(call: ToolCall) -> str:
        return calls.canonical(call)

    def _refuted(self, call: ToolCall, text: str) -> tuple[str, str] | None:
        """(the tool's name, why) when code refutes the call (:func:`calls.refuted`), else None."""
        task = self.tasks.tasks.get(call.name)
        return None if task is None else calls.refuted(task.spec.input_schema, call, text)

    def _inputs(self, meta: dict, name: str, arguments: dict, text: str) -> dict:
        """A declared task's input, its dates and words taken from the person (:func:`calls.task_input`)."""
        task = self.tasks.tasks.get(name)
        return arguments if task is None else calls.task_input(task.spec.input_schema, meta, arguments, text)

    async def _complete(self, meta: dict, sid: str, messages: list[ChatMessage], tools: list[Tool],
                        deadline: Deadline, usage: list[Any], hold: bool,
                        korean: bool = False) -> AsyncGenerator[str | ToolCalls, None]:
        """One model call on the session's route: text pieces (as written, or whole when ``hold``), or a tool call.

        ``korean``: the person wrote Korean; the reply's first letters are held until its script is
        known, and :class:`OtherScript` is raised (nothing of it sent) when they are not Korean.
        """
        raw = self._complete_raw(meta, sid, messages, tools, deadline, usage, hold)
        async for piece in calls.in_persons_script(raw) if korean else raw:
            yield piece

    async def _complete_raw(self, meta: dict, sid: str, messages: list[ChatMessage], tools: list[Tool],
                            deadline: Deadline, usage: list[Any], hold: bool) -> AsyncGenerator[str | ToolCalls, None]:
        """One model call on the session's route: text pieces (as written, or whole when ``hold``), or a tool call."""
        route = self.routes.get(meta["model"])
        pool = route.pool
        target, client = pool.acquire(sid)
        try:
            events = client.complete(messages, options=Options(timeouts=pool.timeouts(deadline)), tools=tools,
                                     session_id=sid, model=route.model, buffered=hold,
                                     timeout_s=deadline.check())
            try:
                async for event in events:
                    if isinstance(event, Delta):
                        yield event.text
                    elif isinstance(event, ToolCalls):
                        yield event
                    elif isinstance(event, Done):
                        usage.append(usage_of(event.usage))
                    elif isinstance(event, StreamError):
                        if event.kind in ("schema_violation", "invalid_output") and tools:
                            raise BrokenCall(f"{event.kind}: {event.message}")
                        kind = "deadline_exceeded" if event.kind.endswith("timeout") else "unavailable"
                        raise ApiError(504 if kind == "deadline_exceeded" else 503, kind,
                                       f"the model did not answer ({event.kind}: {event.message})"[:300],
                                       retryable=True)
            finally:
                await events.aclose()
        finally:
            pool.release(target)

    async def _prepare(self, meta: dict, turns: dict[int, dict], text: str, deadline: Deadline) -> Prepared | Served:
        """The session's search for ``text``: rewritten with the last turns and their results, searched, packed."""
        history = []
        for n in sorted(turns)[-3:]:
            turn = turns[n]
            history += [answers_api.AnswerTurn(role="user", content=turn["text"][:4000])]
            said = " ".join(x for x in (turn["reply"], f"(결과: {turn['evidence']})" if turn.get("evidence") and
                                        turn.get("answered_from") == "tool" else "") if x)
            if said:
                history += [answers_api.AnswerTurn(role="assistant", content=said[:4000])]
        request = answers_api.AnswerRequest(collection=meta["collections"][0], question=text[:2000], history=history)
        return await self.answers.prepare(request, deadline)

    @staticmethod
    def _about_documents(p: Prepared | Served, text: str) -> bool:
        return True if isinstance(p, Served) else calls.about_documents([q.text for q in p.passages], text)

    async def _tool(self, meta: dict, sid: str, name: str, arguments: dict, deadline: Deadline) -> tuple[Any, bool]:
        """A declared task's result or a backend tool's answer, and whether it came from a cache."""
        if self.backend is not None and name in self.backend.tools:  # raises ToolError
            return await self.backend.call(name, arguments, meta.get("owner") or ANONYMOUS, meta.get("caller") or sid)
        run = await self.tasks.prepare(name, TaskRequest(input=arguments, model=meta["model"], session_id=sid))
        response = await self.tasks.run(run, deadline)
        return response.result, response.cached
