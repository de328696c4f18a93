"""Admission control: per-caller rate limits and per-route concurrency caps that shed before deadlines pass.

Both answer 429 with ``Retry-After`` and the standard error body, before any work is done:
- :class:`RateLimit`, a token bucket per caller (the API key's digest, or the client address when
  keys are off): ``rate`` requests a second with bursts of ``burst``;
- :class:`Shedding`, at most ``limit`` requests of a route group in flight; one that cannot get a
  slot within ``wait_s`` is refused at once instead of queueing past its deadline (c=64 against two
  cores used to answer p99 3 s on a 2 s deadline; now it answers 429 early or within the deadline).

A group's cap is one :class:`Slots`, shared by all its routes and by the background work that draws on
it (the LLM's: every route that calls the model, derived queries, interview preparations).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict

from prometheus_client import Counter

from gateway.http.errors import OPENAI_SHAPED_PATHS, ApiError, error_response

SHED = Counter("mesh_gateway_shed", "requests refused before doing work", ["reason"])
for _reason in ("rate_limited", "overloaded"):
    SHED.labels(_reason)


def _caller(scope: dict) -> str:
    headers = dict(scope.get("headers") or [])
    key = headers.get(b"x-api-key") or headers.get(b"authorization")
    if key:
        return "key:" + hashlib.sha256(key).hexdigest()[:16]
    client = scope.get("client") or ("unknown", 0)
    return f"addr:{client[0]}"


class TokenBuckets:
    """A token bucket per caller, at most ``max_callers`` remembered (least recently seen forgotten)."""

    def __init__(self, rate: float, burst: int, max_callers: int = 10_000) -> None:
        self.rate, self.burst, self.max_callers = rate, burst, max_callers
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, caller: str, now: float | None = None) -> float:
        """0 when a request may go now (a token is taken), else seconds until the next token."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.pop(caller, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[caller] = (tokens - 1 if wait == 0 else tokens, now)
        while len(self._buckets) > self.max_callers:
            self._buckets.popitem(last=False)
        return wait


class RateLimit:
    """ASGI middleware: ``/v1/`` requests over a caller's rate are 429 with ``Retry-After``."""

    def __init__(self, app, rate: float, burst: int) -> None:
        self.app = app
        self.buckets = TokenBuckets(rate, burst) if rate > 0 else None

    async def __call__(self, scope, receive, send):  # noqa: D102
        if self.buckets is None or scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            return await self.app(scope, receive, send)
        wait = self.buckets.take(_caller(scope))
        if wait > 0:
            SHED.labels("rate_limited").inc()
            refused = ApiError(429, "rate_limited", f"over {self.buckets.rate:g} requests/s for this caller",
                               retryable=True, retry_after_s=max(1.0, math.ceil(wait)))
            return await error_response(refused)(scope, receive, send)
        return await self.app(scope, receive, send)


class Slots:
    """A named cap on work in flight (``limit`` 0: no cap), shared by every route and job that draws on it."""

    def __init__(self, name: str, limit: int) -> None:
        self.name, self.limit = name, limit
        self._sem = asyncio.Semaphore(limit) if limit > 0 else None

    async def acquire(self, wait_s: float) -> bool:
        """Take a slot, waiting up to ``wait_s``; False when none came free in time."""
        if self._sem is None:
            return True
        try:
            await asyncio.wait_for(self._sem.acquire(), wait_s)
        except TimeoutError:
            return False
        return True

    async def try_acquire(self) -> bool:
        """Take a slot only if one is free now (work that is skipped rather than made to wait)."""
        if self._sem is None:
            return True
        if self._sem.locked():
            return False
        return await self._sem.acquire()  # free: returns at once, without suspending

    def release(self) -> None:
        """Give a slot back."""
        if self._sem is not None:
            self._sem.release()


class Group:
    """Routes that draw on one :class:`Slots`: paths under ``prefixes``, of ``methods`` (None: every method)."""

    def __init__(self, slots: Slots, prefixes: tuple[str, ...], methods: frozenset[str] | None = None) -> None:
        self.slots, self.prefixes, self.methods = slots, prefixes, methods

    def covers(self, path: str, method: str) -> bool:
        """Whether a request takes a slot of this group."""
        return path.startswith(self.prefixes) and (self.methods is None or method in self.methods)


class Shedding:
    """ASGI middleware: a request takes a slot of every group that covers it (search, embeddings, the LLM).

    One that cannot get its slots within ``wait_s`` gets 429 (retry after a second) instead of blowing
    its deadline; the slots it already held are given back.
    """

    def __init__(self, app, groups: list[Group], wait_s: float) -> None:
        self.app = app
        self.wait_s = wait_s
        self.groups = [g for g in groups if g.slots.limit > 0]

    async def __call__(self, scope, receive, send):  # noqa: D102
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "GET")
        held: list[Slots] = []
        try:
            for group in self.groups:
                if not group.covers(path, method):
                    continue
                if not await group.slots.acquire(self.wait_s):
                    SHED.labels("overloaded").inc()
                    refused = ApiError(429, "overloaded", f"too many requests in flight ({group.slots.name}); "
                                       "retry shortly", retryable=True, retry_after_s=1.0)
                    return await error_response(refused, path in OPENAI_SHAPED_PATHS)(scope, receive, send)
                held.append(group.slots)
            await self.app(scope, receive, send)
        finally:
            for slots in held:
                slots.release()
