"""The gateway's reasoning client: a failed call's usage counted for the caller.

A call that ends in ``Done`` is counted by the feature that shows its usage (``usage_of``); one that
ends in a ``StreamError`` — an answer that broke its schema after its regeneration, a timeout after
the first tokens — still used tokens a backend bills, and no feature shows them. They are counted
here, as each error passes, for whoever the running work acts for (gateway/usage/accounting.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from clients.reasoning import AsyncReasoningClient, StreamError
from gateway.reasoning.events import counted

T = TypeVar("T")


class CountedReasoningClient(AsyncReasoningClient):
    """:class:`AsyncReasoningClient` whose streams count the usage a ``StreamError`` carries."""

    @staticmethod
    async def _stream(call, convert: Callable[..., T]) -> AsyncGenerator[T, None]:
        async for event in AsyncReasoningClient._stream(call, convert):
            if isinstance(event, StreamError) and event.usage is not None:
                counted(event.usage)
            yield event
