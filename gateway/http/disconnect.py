"""Work a non-streamed response does for a client: cancelled when the client goes away first.

Starlette cancels nothing when the client of a plain (non-streamed) response disconnects: a chat
completion nobody waits for kept generating, holding an LLM slot, until its answer was whole. Here
the work races the connection: the ASGI ``receive`` channel, once the body is read, yields
``http.disconnect`` only when the client leaves (or the response is sent), so waiting on it costs
nothing while the client stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress
from typing import TypeVar

from starlette.requests import Request

from gateway.http.errors import ApiError

T = TypeVar("T")


async def while_connected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; ``work`` cancelled and 499 raised when the client disconnects before it is done."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        raise ApiError(499, "cancelled", "the client closed the connection before the answer was ready")
    finally:
        watcher.cancel()
        if not task.done():  # this coroutine itself was cancelled (shutdown): so is the work
            task.cancel()
