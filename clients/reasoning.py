"""Async client of mesh.reasoning.v1.ReasoningService: domain types in and out, every call with a deadline.

The enum maps between the contract's names (``stop``, ``first_token_timeout``, ``regenerated`` …) and
the proto live here. Streams are async generators of typed events; leaving one early (``break``,
``aclose()``, or the task being cancelled) cancels the RPC, which cancels the backend request behind it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import grpc
from mesh.reasoning.v1 import reasoning_pb2 as pb
from mesh.reasoning.v1 import reasoning_pb2_grpc as pb_grpc

from clients.channels import aio_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck

DEFAULT_TIMEOUT_S = 60.0
Role = Literal["user", "assistant"]
CompleteRole = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls"]
ToolMode = Literal["auto", "none", "required", "named"]
ErrorKind = Literal["first_token_timeout", "generation_timeout", "total_timeout", "backend_failed",
                    "schema_violation"]
ReasonStatus = Literal["ok", "regenerated", "failed"]
ReasonSource = Literal["model", "rule"]
ROLES: dict[Role, int] = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
COMPLETE_ROLES: dict[CompleteRole, int] = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT,
                                           "system": pb.ROLE_SYSTEM, "tool": pb.ROLE_TOOL}
TOOL_MODES: dict[ToolMode, int] = {"auto": pb.TOOL_CHOICE_MODE_AUTO, "none": pb.TOOL_CHOICE_MODE_NONE,
                                   "required": pb.TOOL_CHOICE_MODE_REQUIRED, "named": pb.TOOL_CHOICE_MODE_NAMED}
FINISH_REASONS: dict[int, FinishReason] = {pb.FINISH_REASON_STOP: "stop", pb.FINISH_REASON_LENGTH: "length",
                                           pb.FINISH_REASON_TOOL_CALLS: "tool_calls"}
ERROR_KINDS: dict[int, ErrorKind] = {
    pb.ERROR_KIND_FIRST_TOKEN_TIMEOUT: "first_token_timeout", pb.ERROR_KIND_GENERATION_TIMEOUT: "generation_timeout",
    pb.ERROR_KIND_TOTAL_TIMEOUT: "total_timeout", pb.ERROR_KIND_BACKEND_FAILED: "backend_failed",
    pb.ERROR_KIND_SCHEMA_VIOLATION: "schema_violation"}
REASON_STATUSES: dict[int, ReasonStatus] = {pb.REASON_STATUS_OK: "ok", pb.REASON_STATUS_REGENERATED: "regenerated",
                                            pb.REASON_STATUS_FAILED: "failed"}
REASON_SOURCES: dict[int, ReasonSource] = {pb.REASON_SOURCE_MODEL: "model", pb.REASON_SOURCE_RULE: "rule"}
T = TypeVar("T")


@dataclass(frozen=True)
class Timeouts:
    """Stage deadlines of one call in seconds; 0 takes the service's default."""

    first_token_s: float = 0.0
    generation_s: float = 0.0
    total_s: float = 0.0


@dataclass(frozen=True)
class Options:
    """How one call generates; 0 and None take the service's defaults.

    ``json_schema`` (Generate only) is a JSON schema the answer must follow.
    """

    max_tokens: int = 0
    temperature: float | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    json_schema: dict | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    model: str = ""  # the backend model to ask for (a model route's); empty: the instance's own


@dataclass(frozen=True)
class Message:
    """One earlier turn of a conversation."""

    role: Role
    content: str


@dataclass(frozen=True)
class Item:
    """A search result to explain."""

    id: str
    title: str
    description: str = ""


@dataclass(frozen=True)
class Usage:
    """Accounting of one call (``llm_calls`` counts schema retries and regenerations)."""

    prompt_tokens: int
    completion_tokens: int
    ttft_ns: int
    total_ns: int
    tokens_per_second: float
    cost_usd: float
    backend: str
    model: str
    estimated: bool
    failed_over: tuple[str, ...]
    llm_calls: int
    instance: str
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from the backend's prompt cache


@dataclass(frozen=True)
class Delta:
    """The next piece of a streamed answer."""

    text: str


@dataclass(frozen=True)
class Done:
    """A stream's successful end."""

    finish_reason: FinishReason
    usage: Usage


@dataclass(frozen=True)
class StreamError:
    """A stream's failed end: the text streamed before it is incomplete."""

    kind: ErrorKind
    message: str
    completion_tokens: int
    usage: Usage | None = None  # what the failed call used (every attempt), when the service says


GenerationEvent = Delta | Done | StreamError


@dataclass(frozen=True)
class TaskRetry:
    """A task's first output broke its schema (``error`` says where): the deltas before it are void."""

    error: str


@dataclass(frozen=True)
class TaskDone:
    """A task run's end: the model's output, the post step's result, attempts and accounting."""

    output: dict
    result: dict
    attempts: int
    usage: Usage
    version: int


TaskEvent = Delta | TaskRetry | TaskDone | StreamError


@dataclass(frozen=True)
class ToolCall:
    """A tool call: ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of an OpenAI-style conversation (Complete)."""

    role: CompleteRole
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Tool:
    """A function the model may call; ``parameters`` is a JSON schema of its arguments (None: none)."""

    name: str
    description: str = ""
    parameters: dict | None = None


@dataclass(frozen=True)
class ToolChoice:
    """Whether and which tool to call (``name`` for ``named``)."""

    mode: ToolMode = "auto"
    name: str = ""


@dataclass(frozen=True)
class ResponseFormat:
    """The answer's shape: ``text``, ``json_object`` or ``json_schema`` (with ``schema``)."""

    type: Literal["text", "json_object", "json_schema"] = "text"
    schema: dict | None = None
    name: str = ""
    strict: bool = False


@dataclass(frozen=True)
class ToolCalls:
    """The tool calls the model chose (a ``Done`` with finish reason ``tool_calls`` follows)."""

    calls: tuple[ToolCall, ...]


CompletionEvent = Delta | ToolCalls | Done | StreamError
FORMAT_TYPES = {"text": pb.RESPONSE_FORMAT_TYPE_TEXT, "json_object": pb.RESPONSE_FORMAT_TYPE_JSON_OBJECT,
                "json_schema": pb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA}


@dataclass(frozen=True)
class Reason:
    """Why one item fits the query.

    ``status`` is ``ok``, ``regenerated`` (``violations``: what the first answer broke) or ``failed``
    (``violations``: what the last answer still broke; ``short`` and ``long`` are code's factual reason,
    ``source`` ``rule``, or empty); None from a service older than the per-card status. ``source``: who
    wrote the text (None: no text, or an older service).
    """

    item_id: str
    short: str
    long: str
    status: ReasonStatus | None
    violations: tuple[str, ...]
    source: ReasonSource | None = None


@dataclass(frozen=True)
class Reasons:
    """One query's reasons in the items' order, and the accounting."""

    reasons: list[Reason]
    usage: Usage


@dataclass(frozen=True)
class ReasonsDone:
    """The end of a reasons stream: every card was sent."""

    usage: Usage


@dataclass(frozen=True)
class ReasonsRequest:
    """One query of a batch."""

    query: str
    items: Sequence[Item]
    options: Options | None = None


@dataclass(frozen=True)
class ReasonsError:
    """Why one query of a batch failed: the gRPC code's name and the message."""

    code: str
    message: str


@dataclass(frozen=True)
class Summary:
    """A summary, or ``failed`` with an empty summary and the reason."""

    summary: str
    failed: bool
    failure_reason: str
    usage: Usage


def options_to_proto(o: Options | None) -> pb.Options:
    """Options -> proto."""
    if o is None:
        return pb.Options()
    t = o.timeouts
    out = pb.Options(max_tokens=o.max_tokens, timeouts=pb.Timeouts(
        first_token_s=t.first_token_s, generation_s=t.generation_s, total_s=t.total_s),
        json_schema=json.dumps(o.json_schema) if o.json_schema is not None else "", model=o.model)
    if o.temperature is not None:
        out.temperature = o.temperature
    if o.top_p is not None:
        out.top_p = o.top_p
    if o.seed is not None:
        out.seed = o.seed
    out.stop.extend(o.stop)
    return out


def reasons_request(query: str, items: Sequence[Item], options: Options | None) -> pb.GenerateReasonsRequest:
    """A reasons request as proto."""
    return pb.GenerateReasonsRequest(query=query, options=options_to_proto(options), items=[
        pb.Item(id=i.id, title=i.title, description=i.description) for i in items])


def usage_from_proto(u: pb.Usage) -> Usage:
    """Proto usage -> domain."""
    return Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, ttft_ns=u.ttft_ns,
                 total_ns=u.total_ns, tokens_per_second=u.tokens_per_second, cost_usd=u.cost_usd,
                 backend=u.backend, model=u.model, estimated=u.estimated, failed_over=tuple(u.failed_over),
                 llm_calls=u.llm_calls, instance=u.instance, cached_prompt_tokens=u.cached_prompt_tokens)


def reason_from_proto(r: pb.Reason) -> Reason:
    """Proto reason -> domain (an unset status is None)."""
    return Reason(item_id=r.item_id, short=r.short, long=r.long, status=REASON_STATUSES.get(r.status),
                  violations=tuple(r.violations), source=REASON_SOURCES.get(r.source))


def reasons_from_proto(resp: pb.GenerateReasonsResponse) -> Reasons:
    """Proto reasons response -> domain."""
    return Reasons([reason_from_proto(r) for r in resp.reasons], usage_from_proto(resp.usage))


def generation_event(e: pb.GenerateResponse | pb.ChatResponse) -> GenerationEvent:
    """A Generate or Chat stream event -> domain."""
    kind = e.WhichOneof("event")
    if kind == "delta":
        return Delta(e.delta)
    if kind == "done":
        return Done(FINISH_REASONS.get(e.done.finish_reason, "stop"), usage_from_proto(e.done.usage))
    return StreamError(ERROR_KINDS.get(e.error.kind, "backend_failed"), e.error.message, e.error.completion_tokens,
                       usage_from_proto(e.error.usage) if e.error.HasField("usage") else None)


def completion_event(e: pb.CompleteResponse) -> CompletionEvent:
    """A Complete stream event -> domain."""
    kind = e.WhichOneof("event")
    if kind == "delta":
        return Delta(e.delta)
    if kind == "tool_calls":
        return ToolCalls(tuple(ToolCall(c.id, c.name, c.arguments) for c in e.tool_calls.calls))
    if kind == "done":
        return Done(FINISH_REASONS.get(e.done.finish_reason, "stop"), usage_from_proto(e.done.usage))
    return StreamError(ERROR_KINDS.get(e.error.kind, "backend_failed"), e.error.message, e.error.completion_tokens,
                       usage_from_proto(e.error.usage) if e.error.HasField("usage") else None)


def task_event(e: pb.RunTaskResponse) -> TaskEvent:
    """A RunTask stream event -> domain."""
    kind = e.WhichOneof("event")
    if kind == "delta":
        return Delta(e.delta)
    if kind == "retry":
        return TaskRetry(e.retry.error)
    if kind == "done":
        return TaskDone(json.loads(e.done.output_json), json.loads(e.done.result_json), e.done.attempts,
                        usage_from_proto(e.done.usage), e.done.version)
    return StreamError(ERROR_KINDS.get(e.error.kind, "backend_failed"), e.error.message, e.error.completion_tokens,
                       usage_from_proto(e.error.usage) if e.error.HasField("usage") else None)


def complete_request(messages: Sequence[ChatMessage], *, options: Options | None = None,
                     response_format: ResponseFormat | None = None, tools: Sequence[Tool] = (),
                     tool_choice: ToolChoice | None = None, session_id: str = "", model: str = "",
                     buffered: bool = False) -> pb.CompleteRequest:
    """A Complete request as proto."""
    req = pb.CompleteRequest(
        messages=[pb.ChatMessage(role=COMPLETE_ROLES[m.role], content=m.content, tool_call_id=m.tool_call_id,
                                 name=m.name, tool_calls=[pb.ToolCall(id=c.id, name=c.name, arguments=c.arguments)
                                                          for c in m.tool_calls]) for m in messages],
        options=options_to_proto(options), session_id=session_id, model=model, buffered=buffered,
        tools=[pb.Tool(name=t.name, description=t.description,
                       parameters_json=json.dumps(t.parameters) if t.parameters is not None else "") for t in tools])
    if tool_choice is not None:
        req.tool_choice.CopyFrom(pb.ToolChoice(mode=TOOL_MODES[tool_choice.mode], name=tool_choice.name))
    if response_format is not None:
        req.response_format.CopyFrom(pb.ResponseFormat(
            type=FORMAT_TYPES[response_format.type], name=response_format.name, strict=response_format.strict,
            json_schema=json.dumps(response_format.schema) if response_format.schema is not None else ""))
    return req


def reasons_event(e: pb.GenerateReasonsStreamResponse) -> Reason | ReasonsDone:
    """A reasons stream event -> domain."""
    if e.WhichOneof("event") == "reason":
        return reason_from_proto(e.reason)
    return ReasonsDone(usage_from_proto(e.done.usage))


def outcome_from_proto(o: pb.ReasonsOutcome) -> Reasons | ReasonsError:
    """One batch outcome -> domain."""
    if o.WhichOneof("outcome") == "response":
        return reasons_from_proto(o.response)
    code, _, message = o.error.partition(": ")
    return ReasonsError(code, message)


class AsyncReasoningClient(HealthCheck):
    """grpc.aio client. No automatic retries: generation is not idempotent (and costs money)."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self._channel = channel or aio_channel(target)
        self._stub = pb_grpc.ReasoningServiceStub(self._channel)

    @staticmethod
    async def _stream(call, convert: Callable[..., T]) -> AsyncGenerator[T, None]:
        try:
            async for event in call:
                yield convert(event)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()  # no-op when finished; cancels the RPC when the consumer left early

    async def _unary(self, method, request, timeout_s: float | None):
        try:
            return await method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def generate(self, prompt: str, *, system: str = "", options: Options | None = None,
                 timeout_s: float | None = None) -> AsyncGenerator[GenerationEvent, None]:
        """Stream a prompt's answer: deltas, then one ``Done`` or ``StreamError``."""
        req = pb.GenerateRequest(prompt=prompt, system=system, options=options_to_proto(options))
        return self._stream(self._stub.Generate(req, timeout=timeout_s or self.timeout_s), generation_event)

    def chat(self, message: str, *, system: str = "", history: Sequence[Message] = (), session_id: str = "",
             options: Options | None = None, timeout_s: float | None = None
             ) -> AsyncGenerator[GenerationEvent, None]:
        """Stream a chat turn: deltas, then one ``Done`` or ``StreamError``."""
        req = pb.ChatRequest(system=system, message=message, session_id=session_id, options=options_to_proto(options),
                             history=[pb.Message(role=ROLES[m.role], content=m.content) for m in history])
        return self._stream(self._stub.Chat(req, timeout=timeout_s or self.timeout_s), generation_event)

    def complete(self, messages: Sequence[ChatMessage], *, options: Options | None = None,
                 response_format: ResponseFormat | None = None, tools: Sequence[Tool] = (),
                 tool_choice: ToolChoice | None = None, session_id: str = "", model: str = "", buffered: bool = False,
                 timeout_s: float | None = None) -> AsyncGenerator[CompletionEvent, None]:
        """Stream an OpenAI-style completion: deltas or one ``ToolCalls``, then one ``Done`` or ``StreamError``.

        ``buffered``: the caller reads the answer whole, so one that breaks its format is regenerated once.
        """
        req = complete_request(messages, options=options, response_format=response_format, tools=tools,
                               tool_choice=tool_choice, session_id=session_id, model=model, buffered=buffered)
        return self._stream(self._stub.Complete(req, timeout=timeout_s or self.timeout_s), completion_event)

    def run_task(self, task: str, value: dict, *, version: int = 0, timeouts: Timeouts | None = None,
                 model: str = "", session_id: str = "", buffered: bool = False, timeout_s: float | None = None
                 ) -> AsyncGenerator[TaskEvent, None]:
        """Stream one run of a declared task: output deltas, then one ``TaskDone`` or ``StreamError``.

        A ``TaskRetry`` comes between two attempts. ``version``: the version the caller expects (0: any);
        ``buffered``: the result is read whole, so no deltas are sent.
        """
        req = pb.RunTaskRequest(task=task, version=version, input_json=json.dumps(value, ensure_ascii=False),
                                model=model, session_id=session_id, buffered=buffered)
        if timeouts is not None:
            req.timeouts.CopyFrom(pb.Timeouts(first_token_s=timeouts.first_token_s,
                                              generation_s=timeouts.generation_s, total_s=timeouts.total_s))
        return self._stream(self._stub.RunTask(req, timeout=timeout_s or self.timeout_s), task_event)

    async def reasons(self, query: str, items: Sequence[Item], *, options: Options | None = None,
                      timeout_s: float | None = None) -> Reasons:
        """Reasons for one query's items (one LLM call, plus a regeneration of the cards that fail the checks)."""
        req = reasons_request(query, items, options)
        return reasons_from_proto(await self._unary(self._stub.GenerateReasons, req, timeout_s))

    def reasons_stream(self, query: str, items: Sequence[Item], *, options: Options | None = None,
                       timeout_s: float | None = None) -> AsyncGenerator[Reason | ReasonsDone, None]:
        """Each card's reason as soon as it is known (not in the items' order), then ``ReasonsDone``."""
        r = reasons_request(query, items, options)
        req = pb.GenerateReasonsStreamRequest(query=r.query, items=r.items, options=r.options)
        return self._stream(self._stub.GenerateReasonsStream(req, timeout=timeout_s or self.timeout_s),
                            reasons_event)

    async def reasons_batch(self, requests: Sequence[ReasonsRequest], *,
                            timeout_s: float | None = None) -> list[Reasons | ReasonsError]:
        """Reasons for several queries, in order; each query fails on its own."""
        req = pb.GenerateReasonsBatchRequest(requests=[reasons_request(r.query, r.items, r.options)
                                                       for r in requests])
        resp = await self._unary(self._stub.GenerateReasonsBatch, req, timeout_s)
        return [outcome_from_proto(o) for o in resp.outcomes]

    async def summarize(self, text: str, *, max_sentences: int = 0, options: Options | None = None,
                        timeout_s: float | None = None) -> Summary:
        """A summary, or an explicit empty result (``failed``)."""
        req = pb.SummarizeRequest(text=text, max_sentences=max_sentences, options=options_to_proto(options))
        resp = await self._unary(self._stub.Summarize, req, timeout_s)
        return Summary(resp.summary, resp.failed, resp.failure_reason, usage_from_proto(resp.usage))

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncReasoningClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
