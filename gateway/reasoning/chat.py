"""Chat turns over SSE on the session's reasoning instance (the ring slot and the RPC released exactly once).

A client that disconnects cancels the gRPC call, which cancels the LLM request behind it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from clients.errors import MeshClientError
from clients.reasoning import Delta, Done, GenerationEvent, Message, Options
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.http.streams import TextDelta
from gateway.reasoning import protocol as api
from gateway.reasoning.events import usage_of
from gateway.reasoning.pool import PooledStream, ReasoningPool


class ChatStream(PooledStream[GenerationEvent]):
    """One chat turn's events as SSE bytes; the ring slot and the RPC are released exactly once."""

    def __init__(self, pool: ReasoningPool, target: str, stream: AsyncGenerator[GenerationEvent, None],
                 history: dict[str, Any] | None = None) -> None:
        super().__init__(pool, target, stream)
        self.history = history or {}

    async def events(self) -> AsyncIterator[bytes]:
        """``delta`` events, then ``done`` or ``error``."""
        try:
            event = self._first
            while event is not None:
                if isinstance(event, Delta):
                    yield api.CHAT_STREAM.send("delta", TextDelta(text=event.text))
                elif isinstance(event, Done):
                    yield api.CHAT_STREAM.send("done", api.ChatDone(finish_reason=event.finish_reason,
                                                                    usage=usage_of(event.usage), history=self.history))
                    return
                else:
                    yield api.CHAT_STREAM.error(ApiError(504 if event.kind.endswith("timeout") else 503, event.kind,
                                               event.message, retryable=True))
                    return
                event = await anext(self.stream, None)
            yield api.CHAT_STREAM.error(ApiError(503, "unavailable", "stream ended without done", retryable=True))
        except MeshClientError as err:
            yield api.CHAT_STREAM.error(err)
        finally:
            await self.release()


class Chat:
    """Chat turns on the session's instance."""

    def __init__(self, pool: ReasoningPool, history_tokens: int = 3000) -> None:
        self.pool = pool
        self.history_tokens = history_tokens

    async def chat(self, body: api.ChatRequest, deadline: Deadline) -> ChatStream:
        """Open a chat turn on the session's instance; started (first event in hand) or raised."""
        options = Options(max_tokens=body.max_tokens or 0, temperature=body.temperature,
                          timeouts=self.pool.timeouts(deadline), model=self.pool.model)
        history, kept = trim_history([Message(m.role, m.content) for m in body.history], body.history_policy,
                                     body.history_turns, self.history_tokens)
        target, client = self.pool.acquire(body.session_id)
        stream = client.chat(body.message, system=body.system, history=history, session_id=body.session_id,
                             options=options, timeout_s=deadline.check())
        return await ChatStream(self.pool, target, stream, kept).start()


def estimated_tokens(m: Message) -> int:
    """The reasoning service's estimate of a message (one token per character plus 4 for the template)."""
    return len(m.content) + 4


def trim_history(history: list[Message], policy: str, turns: int, budget: int) -> tuple[list[Message], dict[str, Any]]:
    """The history the policy keeps, and what it did (``policy``, ``kept``, ``dropped`` messages).

    ``refuse`` keeps everything (the service refuses a history over its budget); ``last_turns`` keeps the
    last ``turns`` user messages with what followed each; ``fit`` keeps the newest messages whose estimate
    fits ``budget``. A kept history always starts at a user message, so no answer is left without its question.
    """
    kept = list(history)
    if policy == "last_turns":
        starts = [i for i, m in enumerate(history) if m.role == "user"]
        kept = history[starts[-turns]:] if len(starts) > turns else kept
    elif policy == "fit":
        used, start = 0, len(history)
        for i in range(len(history) - 1, -1, -1):
            used += estimated_tokens(history[i])
            if used > budget:
                break
            start = i
        kept = history[start:]
        while kept and kept[0].role != "user":
            kept = kept[1:]
    return kept, {"policy": policy, "kept": len(kept), "dropped": len(history) - len(kept)}
