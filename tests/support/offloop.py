"""Test-side arrangement kept off the event loop the services under test share with the test.

The event-loop guard (tests/conftest.py) fails a test during which a callback held the loop over
200 ms; starting a redis-server or a service process, or filling a Redis with a synchronous client,
from inside an async test would be such a callback. :func:`off_loop` enters and leaves a synchronous
context manager in a worker thread instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


@asynccontextmanager
async def off_loop(manager: AbstractContextManager[T]) -> AsyncIterator[T]:
    """``async with off_loop(RedisServer(path)) as server``: ``manager`` entered and exited in a thread."""
    value = await asyncio.to_thread(manager.__enter__)
    try:
        yield value
    except BaseException as err:
        if not await asyncio.to_thread(manager.__exit__, type(err), err, err.__traceback__):
            raise
    else:
        await asyncio.to_thread(manager.__exit__, None, None, None)
