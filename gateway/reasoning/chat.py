"""Chat turns over SSE on the session's reasoning instance (the ring slot and the RPC released exactly once).

A client that disconnects cancels the gRPC call, which cancels the LLM request behind it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from clients.errors import MeshClientError
from clients.reasoning import Delta, Done, GenerationEvent, Message, Options
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.reasoning import protocol as api
from gateway.reasoning.events import error_event, sse, usage_of
from gateway.reasoning.pool import ReasoningPool


class ChatStream:
    """One chat turn's events as SSE bytes; the ring slot and the RPC are released exactly once."""

    def __init__(self, pool: ReasoningPool, target: str, stream: AsyncGenerator[GenerationEvent, None]) -> None:
        self.pool, self.target, self.stream = pool, target, stream
        self._released = False
        self._first: GenerationEvent | None = None

    async def start(self) -> ChatStream:
        """Wait for the first event: bad input and unreachable services fail here, before any byte is sent."""
        try:
            self._first = await anext(self.stream)
        except MeshClientError:
            await self.release()
            raise
        except StopAsyncIteration:
            await self.release()
            raise ApiError(503, "unavailable", "the reasoning stream ended without an event", retryable=True) from None
        return self

    async def release(self) -> None:
        """Close the RPC and free the ring slot (idempotent; also runs when the body never starts)."""
        if not self._released:
            self._released = True
            await self.stream.aclose()
            self.pool.release(self.target)

    async def events(self) -> AsyncIterator[bytes]:
        """``delta`` events, then ``done`` or ``error``."""
        try:
            event = self._first
            while event is not None:
                if isinstance(event, Delta):
                    yield sse("delta", {"text": event.text})
                elif isinstance(event, Done):
                    yield sse("done", {"finish_reason": event.finish_reason,
                                       "usage": usage_of(event.usage).model_dump()})
                    return
                else:
                    yield error_event(ApiError(504 if event.kind.endswith("timeout") else 503, event.kind,
                                               event.message, retryable=True))
                    return
                event = await anext(self.stream, None)
            yield error_event(ApiError(503, "unavailable", "stream ended without done", retryable=True))
        except MeshClientError as err:
            yield error_event(err)
        finally:
            await self.release()


class Chat:
    """Chat turns on the session's instance."""

    def __init__(self, pool: ReasoningPool) -> None:
        self.pool = pool

    async def chat(self, body: api.ChatRequest, deadline: Deadline) -> ChatStream:
        """Open a chat turn on the session's instance; started (first event in hand) or raised."""
        options = Options(max_tokens=body.max_tokens or 0, temperature=body.temperature,
                          timeouts=self.pool.timeouts(deadline))
        history = [Message(m.role, m.content) for m in body.history]
        target, client = self.pool.acquire(body.session_id)
        stream = client.chat(body.message, system=body.system, history=history, session_id=body.session_id,
                             options=options, timeout_s=deadline.check())
        return await ChatStream(self.pool, target, stream).start()
