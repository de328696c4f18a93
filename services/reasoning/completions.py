"""OpenAI-style completions: a conversation in, text or a tool call out, every structured answer validated.

A response format or a tool choice is decoded as schema-constrained output, so it works on any backend
with a grammar or guided decoding (llama-server, vLLM, Gemini's JSON mode), not only on those whose
chat template parses tool calls (the embedded Qwen2.5-Coder-1.5B under llama-server ``--jinja``
wrote its calls as a json block in the text instead):

- with tools, the model answers one JSON object, either ``{"tool": <name>, "arguments": <that
  tool's parameters>}`` or, when the choice allows it, ``{"answer": <text or the response format>}``;
  the schema is the ``anyOf`` of those branches, so a call's arguments follow the tool's schema by
  construction, and are validated here anyway;
- earlier tool calls and results are written into the conversation as that same JSON and as user
  turns naming the call, so no backend needs a tool-aware chat template.

An answer that does not parse or validate is regenerated once with the violation named (always for
tool calls, which are never streamed before they are decoded; for a response format only when the
caller reads the answer whole), then fails as a schema violation: it is never returned as success.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from prometheus_client import Counter

from services.reasoning.arguments import correct, foreign_characters, grounded
from services.reasoning.grounding import ask_for, ask_instead, ground
from services.reasoning.schema_checks import AnswerInvalid, parse_json, validate
from services.reasoning.signatures import has_numbers, signature

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS = 32
MAX_STOP = 4
ToolMode = Literal["auto", "none", "required", "named"]
Role = Literal["system", "user", "assistant", "tool"]
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
REPLY_TOOL = "reply_directly"  # the answer branch under ``auto``, offered as one more tool (when no tool has the name)
UNGROUNDED_PREFIX = "ungrounded: "


GROUNDING = Counter("mesh_reasoning_tool_grounding_total", "Tool calls code grounded in the user's words: values "
                    "put back in their spelling (snapped), unsaid optional values left out (dropped), calls turned "
                    "into a question (ask) or refused (decline)", ["outcome"])


class Ungrounded(AnswerInvalid):
    """A tool call (under ``auto``) none of whose required arguments the user gave: answered directly instead."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCallIn:
    """An earlier tool call of the conversation (arguments as the caller sent them, JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class MessageIn:
    """One message of the conversation."""

    role: Role
    content: str
    tool_calls: tuple[ToolCallIn, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class ToolCallOut:
    """A call the model chose: ``arguments`` is JSON text that validates against the tool's parameters."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Decoded:
    """A structured answer, decoded: text content, or tool calls."""

    content: str = ""
    tool_calls: tuple[ToolCallOut, ...] = ()


@dataclass
class Plan:
    """How one completion runs: the backend's messages, the schema it is held to, and how to decode."""

    messages: list[dict[str, str]]
    schema: dict[str, Any] | None = None  # the backend's constraint (None: free text)
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    tool_mode: ToolMode = "none"
    answer_schema: dict[str, Any] | None = None  # the response format (None: text)
    user_text: str = ""  # the last user message: tool arguments are checked against it (arguments.py)
    # Every user message, oldest first: a value grounded in any of them is the person's (grounding.py), so
    # the answer to a question code asked ("라지로") completes the call the earlier message began.
    said: str = ""
    today: date | None = None  # the reference date of date arguments

    def reply_schema(self) -> dict[str, Any]:
        """The ``auto`` answer's branch alone: what a call the user did not ask for is answered with instead."""
        return {"type": "object", "properties": {"tool": {"const": REPLY_TOOL},
                                                 "answer": self.answer_schema or {"type": "string"}},
                "required": ["tool", "answer"], "additionalProperties": False}

    def _ground(self, name: str, arguments: dict[str, Any], may_reply: bool) -> tuple[dict[str, Any], str | None]:
        """The call's arguments grounded in the user's words (services/reasoning/grounding.py), or a question.

        Under ``auto`` a required value the words do not give is asked for (the reply, no call), and a call
        of a tool the request shares no word with, its required values not given, is refused (the model
        replies). Otherwise near copies are put back in the user's spelling and unsaid optional values left
        out, when the tool's schema still holds; else the model's arguments stand.
        """
        spec = self.tools[name]
        g = ground(name, spec.description, arguments, spec.parameters, self.said or self.user_text)
        for kind, n in (("snapped", len(g.snapped)), ("dropped", len(g.dropped))):
            if n:
                GROUNDING.labels(kind).inc(n)
        if g.outcome != "call" and may_reply:
            GROUNDING.labels(g.outcome).inc()
            if g.outcome == "decline":
                raise Ungrounded(f"{UNGROUNDED_PREFIX}{name} does not do what the user asked")
            return arguments, ask_for(g.missing, spec.parameters)
        if g.outcome != "call":
            return arguments, None
        try:
            validate(g.arguments, spec.parameters, f"the arguments of {name}")
        except AnswerInvalid:
            return arguments, None
        return g.arguments, None

    def _has_results(self) -> bool:
        """Whether the conversation holds a tool's result.

        A reply may then come from it ("그 공고 근무지 다시 말해줘" after the postings): never replaced by a
        question for new values.
        """
        return any(m.get("role") == "tool" or m.get("tool_calls") or str(m.get("content") or "").startswith(
            "Result of the tool call") for m in self.messages if isinstance(m, dict))

    @property
    def decodes_tools(self) -> bool:
        """True when the answer is a tool-choice object to decode (never streamed as it is written)."""
        return bool(self.tools) and self.tool_mode != "none"

    def decode(self, text: str) -> Decoded:
        """The answer ``text`` decoded and validated (raises :class:`AnswerInvalid`)."""
        if self.decodes_tools:
            return self._decode_tools(text)
        if self.answer_schema is not None:
            validate(parse_json(text), self.answer_schema, "the answer")
        return Decoded(content=text)

    def _decode_tools(self, text: str) -> Decoded:
        obj = parse_json(text)
        if not isinstance(obj, dict):
            raise AnswerInvalid("the answer is not a JSON object")
        if obj.get("tool") == REPLY_TOOL and reply_as_tool(self.tools, self.tool_mode) and "answer" in obj:
            obj = {"answer": obj["answer"]}
        if "tool" in obj:
            name = obj["tool"]
            if name not in self.tools or (self.tool_mode == "named" and name != next(iter(self.tools))):
                raise AnswerInvalid(f"tool {name!r} is not one of {sorted(self.tools)}")
            arguments = obj.get("arguments", {})
            validate(arguments, self.tools[name].parameters, f"the arguments of {name}")
            if self.today is not None:
                arguments = correct(arguments, self.tools[name].parameters, self.user_text, self.today)
                stray = foreign_characters(arguments, self.user_text) if self.user_text else ""
                if stray:  # a word in a script the user did not write, not put right from the user's words
                    raise AnswerInvalid(f"the arguments of {name} hold characters the user did not write "
                                        f"({stray[:8]!r}): write the user's words as they wrote them")
                may_reply = self.tool_mode == "auto" and reply_as_tool(self.tools, self.tool_mode)
                if self.said or self.user_text:  # first: a value not given is asked for, not refused
                    arguments, asked = self._ground(name, arguments, may_reply)
                    if asked is not None:
                        return Decoded(content=asked)
                if may_reply and not grounded(arguments, self.tools[name].parameters, self.user_text, self.today):
                    raise Ungrounded(f"{UNGROUNDED_PREFIX}none of the required arguments of {name} comes from "
                                     "the user's words")
            return Decoded(tool_calls=(ToolCallOut("call_" + secrets.token_hex(12), name,
                                                   json.dumps(arguments, ensure_ascii=False)),))
        if "answer" in obj and self.tool_mode == "auto":
            answer = obj["answer"]
            if self.answer_schema is not None:
                validate(answer, self.answer_schema, "the answer")
                return Decoded(content=json.dumps(answer, ensure_ascii=False))
            if not isinstance(answer, str):
                raise AnswerInvalid("the answer is not a string")
            asked = ask_instead([(t.name, t.description, t.parameters) for t in self.tools.values()],
                                self.user_text) if self.today is not None and not self._has_results() else None
            if asked is not None:  # a request to act one tool serves, answered without it: its values asked
                GROUNDING.labels("ask").inc()
                return Decoded(content=asked)
            return Decoded(content=answer)
        raise AnswerInvalid('the answer has neither "tool" nor an allowed "answer"')


_REPLY_OPENING = re.compile(r'^\s*\{\s*(?:"tool"\s*:\s*"' + REPLY_TOOL + r'"\s*,\s*)?"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def cut_reply(text: str) -> str | None:
    """The text of a direct reply cut at max_tokens inside its JSON string (None when ``text`` is not one).

    A plain answer cut at max_tokens is returned cut, with ``finish_reason: length`` (as OpenAI does);
    a direct reply under ``auto`` is the same answer inside ``{"tool": "reply_directly", "answer": "``,
    so it is read back out instead of failing as JSON that never closed.
    """
    m = _REPLY_OPENING.match(text)
    if m is None:
        return None
    out: list[str] = []
    i = m.end()
    while i < len(text):
        ch = text[i]
        if ch == '"':
            break
        if ch == "\\":
            if i + 1 >= len(text):
                break
            nxt = text[i + 1]
            if nxt == "u":
                if i + 6 > len(text):
                    break
                try:
                    code = int(text[i + 2:i + 6], 16)
                except ValueError:
                    break
                if 0xD800 <= code < 0xDC00:  # a high surrogate: a character only with its low half
                    low = re.match(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})", text[i + 6:i + 12])
                    if low is None:
                        break  # cut between the halves (or a lone half): the character is not kept
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low[1], 16) - 0xDC00)
                    i += 6
                elif 0xDC00 <= code < 0xE000:
                    break  # a lone low half
                out.append(chr(code))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


REPLY_DESCRIPTION = ("도구가 하는 일을 요청받지 않았을 때 직접 답한다: 인사, 감사, 잡담, 너(assistant)에 대한 질문, "
                     "조언, 의견, 설명, 번역, 계산. Reply yourself when no tool does what was asked.")


def reply_as_tool(tools: dict[str, ToolSpec], mode: ToolMode) -> bool:
    """Whether the ``auto`` answer branch is offered as the pseudo-tool :data:`REPLY_TOOL` (its name is free)."""
    return mode == "auto" and REPLY_TOOL not in tools


def tool_choice_schema(tools: dict[str, ToolSpec], mode: ToolMode,
                       answer_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The schema of a tool-choice answer: one branch per callable tool, plus the answer under ``auto``.

    Under ``auto`` the answer is one more choice of the same form, ``{"tool": "reply_directly",
    "answer": ...}``: the model's first decision is then which of the listed names fits the request,
    the reply among them, rather than the shape of the object (a small model preferred ``{"tool"``
    whatever was asked: bench/results/llm_api_arguments.md).
    """
    branches: list[dict[str, Any]] = [
        {"type": "object", "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
         "required": ["tool", "arguments"], "additionalProperties": False} for t in tools.values()]
    if mode == "auto":
        answer = answer_schema or {"type": "string"}
        if reply_as_tool(tools, mode):
            branches.append({"type": "object", "properties": {"tool": {"const": REPLY_TOOL}, "answer": answer},
                             "required": ["tool", "answer"], "additionalProperties": False})
        else:
            branches.append({"type": "object", "properties": {"answer": answer}, "required": ["answer"],
                             "additionalProperties": False})
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def tool_instructions(tools: dict[str, ToolSpec], mode: ToolMode, today: date | None = None,
                      zone: str = "") -> str:
    """What the model is told about the tools, the answer's form, today's date and Korean amounts.

    Each tool is one line, ``- name{arguments}: description``, its arguments as a signature
    (:func:`signatures.signature`: the grammar holds the model to the schema's bounds); the note on
    Korean amounts only when some argument is a number.
    """
    reply = reply_as_tool(tools, mode)
    lines = ["You can call these tools (name{arguments}: what it does; ? marks an optional argument):"]
    lines += [f"- {t.name}{signature(t.parameters)}: {t.description}" for t in tools.values()]
    if reply:
        lines.append(f"- {REPLY_TOOL}{{answer: string}}: {REPLY_DESCRIPTION}")
    lines += ["", "Reply with exactly one JSON object:",
              '- {"tool": "<tool name>", "arguments": {...}} to call a tool; the arguments follow its parameters '
              "and take their values from the conversation;"]
    if reply:
        lines.append(f'- {{"tool": "{REPLY_TOOL}", "answer": "<reply>"}} when no tool does what the user asked, or '
                     "a tool result already holds it.")
        lines.append("Pick the tool whose description matches the request.")
    elif mode == "auto":
        lines.append('- {"answer": "<reply>"} to reply to the user yourself, when no tool is needed or a tool '
                     "result already holds what the user asked.")
    elif mode == "required":
        lines.append("You must call one of the tools.")
    else:
        lines.append(f"You must call the tool {next(iter(tools))}.")
    if any(has_numbers(t.parameters) for t in tools.values()):
        lines.append("Korean amounts: 천 = 1,000, 만 = 10,000, 억 = 100,000,000 (5만 원 = 50000, 1억 2천만 원 = "
                     "120000000); a currency is the one the user names (원 = KRW, 달러 = USD, 유로 = EUR, 엔 = JPY).")
    if today is not None:
        lines.append(f"Today is {today.isoformat()} ({WEEKDAY_NAMES[today.weekday()]}{', ' + zone if zone else ''}):"
                     " dates without a year are the coming ones; write dates as YYYY-MM-DD.")
    return "\n".join(lines)


def backend_messages(messages: list[MessageIn], tools: dict[str, ToolSpec], mode: ToolMode,
                     today: date | None = None, zone: str = "") -> list[dict[str, str]]:
    """The conversation for any chat template: tool calls as the answer JSON, tool results as user turns.

    With tools, the instructions (and today's date) follow the caller's own system message, which
    comes first: what it says (another date, say) is read before them.
    """
    out: list[dict[str, str]] = []
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            calls = [json.dumps({"tool": c.name, "arguments": _arguments(c.arguments)}, ensure_ascii=False)
                     for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(([m.content] if m.content else []) + calls)})
        elif m.role == "tool":
            name = m.name or names.get(m.tool_call_id, "")
            out.append({"role": "user", "content": f"Result of the tool call {m.tool_call_id} ({name}):\n{m.content}"})
        else:
            out.append({"role": m.role, "content": m.content})
    if tools and mode != "none":
        note = tool_instructions(tools, mode, today, zone)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + note}
        else:
            out.insert(0, {"role": "system", "content": note})
    return _merge_same_roles(out)


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


def _merge_same_roles(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Adjacent messages of one role joined (several tool results in a row; templates that want turns to alternate)."""
    out: list[dict[str, str]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"] and m["role"] != "system":
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(m)
    return out


def regeneration_note(error: str, plan: Plan) -> dict[str, str]:
    """The user turn asking for one more answer after ``error``."""
    if error.startswith(UNGROUNDED_PREFIX):
        return {"role": "user", "content": f"No tool fits what I asked ({error.removeprefix(UNGROUNDED_PREFIX)}). "
                                           f'Reply to me directly with {{"tool": "{REPLY_TOOL}", "answer": ...}}.'}
    form = "one JSON object in the form described above" if plan.decodes_tools else "JSON following the schema"
    return {"role": "user", "content": f"Your last reply was not valid ({error}). Reply again with {form}."}
