"""`/v1/chat/completions` over the reasoning service's Complete RPC, on the request's model route.

OpenAI's request is translated field by field (a field the mesh does not support is refused, naming
it); the answer comes back as ``chat.completion`` or as ``chat.completion.chunk`` events ending in
``data: [DONE]``. Structured output and tool calls are decoded and validated in the reasoning service
(see services/reasoning/completions.py), so the answer a client gets is valid or an error.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator

from clients.errors import MeshClientError
from clients.reasoning import (
    ChatMessage,
    CompletionEvent,
    Delta,
    Done,
    Options,
    ResponseFormat,
    StreamError,
    Tool,
    ToolCall,
    ToolCalls,
    ToolChoice,
)
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, from_client_error, openai_error_body
from gateway.openai_api import chat_protocol as api
from gateway.reasoning.events import usage_of
from gateway.reasoning.pool import PooledStream, ReasoningPool
from gateway.reasoning.routes import ModelRoutes


def unsupported(body: api.ChatCompletionRequest) -> None:
    """400 naming the first field set to a value the mesh does not support."""
    for name, (accepted, why) in api.UNSUPPORTED.items():
        if getattr(body, name) not in accepted:
            raise ApiError(400, "unsupported_parameter", f"{name}: {why}",
                           fields=[FieldError(field=name, description=why)])
    if body.response_format is not None and body.response_format.type == "json_schema" and (
            body.response_format.json_schema is None or body.response_format.json_schema.schema_ is None):
        raise ApiError(400, "invalid_argument", "response_format json_schema needs json_schema.schema",
                       fields=[FieldError(field="response_format.json_schema", description="give a schema")])
    if body.stream_options is not None and not body.stream:
        # OpenAI answers so too: the options describe a stream this request did not ask for.
        raise ApiError(400, "invalid_argument", "stream_options is only allowed when stream is true",
                       fields=[FieldError(field="stream_options", description="only with stream: true")])


def messages_of(body: api.ChatCompletionRequest) -> list[ChatMessage]:
    """OpenAI messages -> the reasoning client's (``developer`` is a system message)."""
    out = []
    for m in body.messages:
        role = "system" if m.role == "developer" else m.role
        calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or [])
        out.append(ChatMessage(role, m.text(), calls, m.tool_call_id or "", m.name or ""))
    return out


def tool_choice_of(body: api.ChatCompletionRequest) -> ToolChoice | None:
    """OpenAI's tool choice -> the client's (None: auto when tools are given)."""
    choice = body.tool_choice
    if choice is None:
        return None
    if isinstance(choice, api.CompletionNamedToolChoice):
        return ToolChoice("named", choice.function.name)
    return ToolChoice(choice)


def format_of(body: api.ChatCompletionRequest) -> ResponseFormat | None:
    """OpenAI's response format -> the client's."""
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return ResponseFormat("json_object")
    assert fmt.json_schema is not None
    return ResponseFormat("json_schema", fmt.json_schema.schema_, fmt.json_schema.name, bool(fmt.json_schema.strict))


def stop_of(body: api.ChatCompletionRequest) -> tuple[str, ...]:
    """``stop`` as a tuple."""
    if body.stop is None:
        return ()
    return (body.stop,) if isinstance(body.stop, str) else tuple(body.stop)


class CompletionStream(PooledStream[CompletionEvent]):
    """One completion's events; the ring slot and the RPC are released exactly once."""

    def __init__(self, pool: ReasoningPool, target: str, events: AsyncGenerator[CompletionEvent, None],
                 model: str) -> None:
        super().__init__(pool, target, events)
        self.model = model
        self.id = "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())

    async def events(self) -> AsyncIterator[CompletionEvent]:
        """Every event of the answer, the first included; the stream is released at the end."""
        try:
            event = self._first
            while event is not None:
                yield event
                if isinstance(event, Done | StreamError):
                    return
                event = await anext(self.stream, None)
            raise ApiError(503, "unavailable", "the reasoning stream ended without done", retryable=True)
        finally:
            await self.release()

    # -- the two answer shapes -------------------------------------------------------------------

    async def whole(self) -> api.ChatCompletion:
        """The answer as one ``chat.completion`` (the slot and the RPC released when it returns or fails)."""
        try:
            return await self._whole()
        finally:
            await self.release()

    async def _whole(self) -> api.ChatCompletion:
        parts: list[str] = []
        calls: list[api.CompletionResponseToolCall] = []
        async for event in self.events():
            if isinstance(event, Delta):
                parts.append(event.text)
            elif isinstance(event, ToolCalls):
                calls += [tool_call(c) for c in event.calls]
            elif isinstance(event, StreamError):
                raise stream_error(event)
            else:
                usage = usage_of(event.usage)
                message = api.CompletionResponseMessage(content=None if calls and not parts else "".join(parts),
                                              tool_calls=calls or None)
                return api.ChatCompletion(
                    id=self.id, created=self.created, model=self.model,
                    choices=[api.CompletionChoice(message=message, finish_reason=event.finish_reason)],
                    usage=api.CompletionUsage(prompt_tokens=usage.prompt_tokens,
                                              completion_tokens=usage.completion_tokens,
                                              total_tokens=usage.prompt_tokens + usage.completion_tokens,
                                              prompt_tokens_details={"cached_tokens": usage.cached_prompt_tokens}))
        raise ApiError(503, "unavailable", "the reasoning stream ended without done", retryable=True)

    async def chunks(self, include_usage: bool) -> AsyncIterator[bytes]:
        """The answer as ``chat.completion.chunk`` SSE lines, then ``data: [DONE]`` (an error: one error line)."""
        send = api.STREAM.send
        yield send("chunk", self._chunk(api.ChunkDelta(role="assistant", content="")))
        try:
            async for event in self.events():
                if isinstance(event, Delta):
                    yield send("chunk", self._chunk(api.ChunkDelta(content=event.text)))
                elif isinstance(event, ToolCalls):
                    calls = [api.ChunkToolCall(index=i, id=c.id, function=tool_call(c).function)
                             for i, c in enumerate(event.calls)]
                    yield send("chunk", self._chunk(api.ChunkDelta(tool_calls=calls)))
                elif isinstance(event, StreamError):
                    yield send("error", openai_error(stream_error(event)))
                    return
                else:
                    usage = usage_of(event.usage)
                    yield send("chunk", self._chunk(api.ChunkDelta(), finish_reason=event.finish_reason))
                    if include_usage:
                        yield send("chunk", api.ChatCompletionChunk(
                            id=self.id, object="chat.completion.chunk", created=self.created, model=self.model,
                            choices=[], usage=api.CompletionUsage(
                                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                                total_tokens=usage.prompt_tokens + usage.completion_tokens,
                                prompt_tokens_details={"cached_tokens": usage.cached_prompt_tokens})))
                    yield api.STREAM.line("[DONE]")
        except ApiError as err:
            yield send("error", openai_error(err))
        except MeshClientError as err:
            yield send("error", openai_error(from_client_error(err)))

    def _chunk(self, delta: api.ChunkDelta, finish_reason: str | None = None) -> api.ChatCompletionChunk:
        return api.ChatCompletionChunk(id=self.id, object="chat.completion.chunk", created=self.created,
                                       model=self.model, choices=[api.ChunkChoice(
                                           index=0, delta=delta, finish_reason=finish_reason,  # type: ignore[arg-type]
                                           logprobs=None)])


def openai_error(err: ApiError) -> api.OpenAiError:
    """An error event of the stream, in OpenAI's shape."""
    return api.OpenAiError.model_validate(openai_error_body(err))


def tool_call(c: ToolCall) -> api.CompletionResponseToolCall:
    """A tool call in OpenAI's response shape."""
    return api.CompletionResponseToolCall(
        id=c.id, function=api.CompletionResponseFunctionCall(name=c.name, arguments=c.arguments))


def stream_error(e: StreamError) -> ApiError:
    """A stream's terminal error as an HTTP error (a schema violation is the model's failure: 502)."""
    status = 504 if e.kind.endswith("timeout") else 502 if e.kind == "schema_violation" else 503
    return ApiError(status, e.kind, e.message, retryable=True)


class ChatCompletions:
    """``/v1/chat/completions`` on the request's model route."""

    def __init__(self, routes: ModelRoutes) -> None:
        self.routes = routes

    async def open(self, body: api.ChatCompletionRequest, deadline: Deadline, session: str | None
                   ) -> CompletionStream:
        """Validate, pick the route and its instance, and start the call (first event in hand)."""
        unsupported(body)
        route = self.routes.get(body.model)
        pool = route.pool
        options = Options(max_tokens=body.max_completion_tokens or body.max_tokens or 0,
                          temperature=body.temperature, timeouts=pool.timeouts(deadline), top_p=body.top_p,
                          stop=stop_of(body), seed=body.seed)
        tools = [Tool(t.function.name, t.function.description or "", t.function.parameters)
                 for t in body.tools or []]
        key = session or body.user or ""
        target, client = pool.acquire(key)
        try:
            events = client.complete(messages_of(body), options=options, response_format=format_of(body),
                                     tools=tools, tool_choice=tool_choice_of(body), session_id=key,
                                     model=route.model, buffered=not body.stream, timeout_s=deadline.check())
        except BaseException:
            pool.release(target)
            raise
        return await CompletionStream(pool, target, events, body.model).start()
