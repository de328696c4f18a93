"""Waiting for a condition another process brings about, bounded, failing with what was last seen.

In-process tests wait on events (asyncio.Event, threading.Event); these are for what only shows
from outside (a job's state over REST, a metric another process exports, a server's health over
the health protocol's Watch stream). The bound is a failure limit, never the assertion: nothing here
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
FINISHED = ("succeeded", "failed")


def eventually(probe: Callable[[], T], until: Callable[[T], bool], *, timeout_s: float = 30.0,
               every_s: float = 0.05, what: str = "condition",
               ignoring: tuple[type[Exception], ...] = ()) -> T:
    """Call ``probe`` until ``until(value)`` holds and return that value; AssertionError with the last value.

    An exception of a type in ``ignoring`` (a server not listening yet: OSError) counts as "not yet"
    and is the last value seen.
    """
    give_up = time.monotonic() + timeout_s
    while True:
        try:
            value: Any = probe()
        except ignoring as exc:
            value = exc
        else:
            if until(value):
                return value
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} not met within {timeout_s} s; last seen: {value!r}"[:2000])
        time.sleep(every_s)


async def eventually_async(probe: Callable[[], Awaitable[T] | T], until: Callable[[T], bool], *,
                           timeout_s: float = 30.0, every_s: float = 0.05, what: str = "condition") -> T:
    """The async twin of :func:`eventually`; ``probe`` may be a coroutine function or a plain one."""
    give_up = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if until(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} not met within {timeout_s} s; last seen: {value!r}"[:2000])
        await asyncio.sleep(every_s)


async def job_finished(http: Any, path: str, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """GET ``path`` (a job resource, on an httpx.AsyncClient) until its state is final; the last body."""
    async def probe() -> dict[str, Any]:
        r = await http.get(path)
        assert r.status_code == 200, r.text
        return r.json()

    return await eventually_async(probe, lambda job: job["state"] in FINISHED, timeout_s=timeout_s,
                                  what=f"{path} finished")


async def health_becomes(channel: Any, service: str, want: int, timeout_s: float = 20.0) -> None:
    """Return when health name ``service`` on ``channel`` (a grpc.aio channel) reports ``want``.

    The health protocol's Watch stream sends every change, so nothing polls; the call's deadline is the bound.
    """
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service),
                                                     timeout=timeout_s)
    async for resp in call:
        if resp.status == want:
            call.cancel()
            return
