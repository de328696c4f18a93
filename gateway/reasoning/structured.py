"""Schema-constrained LLM calls the gateway's features make (derived queries, a standalone question, an answer).

One call is a ``Complete`` with a ``json_schema`` response format on a model route: the backend's
grammar holds the output to the schema where it has one, and the reasoning service validates it
either way. Deterministic by default (temperature 0, a fixed seed). :class:`StructuredStream`
gives the text as it is generated and the parsed object at the end; :func:`structured` gives the
object only. Failures are :class:`StructuredFailed` with a short reason, so a feature can degrade.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from clients.errors import MeshClientError
from clients.reasoning import ChatMessage, CompletionEvent, Delta, Done, Options, ResponseFormat, Timeouts, Usage
from gateway.reasoning.events import counted
from gateway.reasoning.pool import PooledStream
from gateway.reasoning.routes import ModelRoute

SEED = 7  # any fixed seed: the same request gives the same answer where the backend honours it


class StructuredFailed(Exception):
    """A structured call that gave no valid object: ``reason`` names why (``deadline_exceeded``, ``unavailable`` …)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason
        self.message = message


class StructuredStream(PooledStream[CompletionEvent]):
    """One schema-constrained call: :meth:`deltas` yields text as generated; then :attr:`value` and :attr:`usage`."""

    value: Any = None
    usage: Usage | None = None

    async def deltas(self) -> AsyncGenerator[str, None]:
        """The generated text piece by piece; the parsed object is :attr:`value` afterwards (or StructuredFailed)."""
        text: list[str] = []
        try:
            event = self._first
            while event is not None:
                if isinstance(event, Delta):
                    text.append(event.text)
                    yield event.text
                elif isinstance(event, Done):
                    self.usage = event.usage
                    try:
                        self.value = json.loads("".join(text))
                    except ValueError:
                        raise StructuredFailed("invalid_output", "the answer is not JSON") from None
                    return
                elif not isinstance(event, Delta):
                    kind = getattr(event, "kind", "invalid_output")
                    raise StructuredFailed(kind, getattr(event, "message", "tool calls where JSON was asked"))
                event = await anext(self.stream, None)
            raise StructuredFailed("unavailable", "the stream ended without done")
        except MeshClientError as err:
            raise StructuredFailed(err.code.name.lower(), err.message) from None
        finally:
            await self.release()


async def open_structured(route: ModelRoute, messages: Sequence[ChatMessage], schema: dict, name: str, *,
                          key: str, total_s: float, max_tokens: int, buffered: bool = False) -> StructuredStream:
    """Start a schema-constrained call on ``route`` (the ring slot of ``key``), its first event in hand.

    ``buffered``: the answer is read whole, so the service regenerates once an answer that breaks
    the schema. Start-up failures are :class:`StructuredFailed`.
    """
    options = Options(max_tokens=max_tokens, temperature=0.0, seed=SEED,
                      timeouts=Timeouts(first_token_s=total_s, generation_s=total_s, total_s=total_s))
    target, client = route.pool.acquire(key)
    stream = client.complete(messages, options=options, model=route.model, buffered=buffered,
                             response_format=ResponseFormat("json_schema", schema, name, strict=True),
                             timeout_s=total_s + 0.5)
    try:
        return await StructuredStream(route.pool, target, stream).start()
    except MeshClientError as err:
        raise StructuredFailed(err.code.name.lower(), err.message) from None
    except Exception as err:  # noqa: BLE001 - an ApiError (the stream ended at once) is a failure here too
        raise StructuredFailed("unavailable", str(err)) from None


async def structured(route: ModelRoute, messages: Sequence[ChatMessage], schema: dict, name: str, *,
                     key: str, total_s: float, max_tokens: int) -> tuple[Any, Usage | None]:
    """The parsed object of one schema-constrained call, and its usage; :class:`StructuredFailed` when none.

    The call's usage is counted for the caller here, whether the object parsed or not (a caller that
    shows it in its response does not count it again).
    """
    call = await open_structured(route, messages, schema, name, key=key, total_s=total_s, max_tokens=max_tokens,
                                 buffered=True)
    try:
        async for _ in call.deltas():
            pass
    finally:
        if call.usage is not None:
            counted(call.usage)
    return call.value, call.usage
