"""The benches' one load generator: a fixed count of HTTP requests to loopback, at a fixed concurrency, bounded in time.

``run_load(base, n, concurrency, make)`` sends ``make(0)`` .. ``make(n - 1)`` with ``concurrency`` in
flight (optionally paced at ``rate_per_s``) and returns every request's :class:`Outcome`: its status or
how it failed, its latency, whether it answered JSON and Retry-After, and for a server-sent event stream
the events with the second each arrived. It stops by itself: no request starts after ``time_limit_s``
(those are counted ``not sent``) and none runs longer than ``timeout_s``. Every request must go to a
loopback address; anything else raises ``ValueError`` before it is sent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

Request = tuple[str, str, dict[str, Any]]  # method, path (relative to the base), httpx keyword arguments
NOT_SENT = "not sent"


@dataclass
class Outcome:
    """One request's end: an HTTP status, or how it failed (``timeout``, ``refused``, ``reset``, ``unsent``)."""

    status: int | None
    failure: str = ""
    json_body: bool = False
    retry_after: bool = False
    latency_s: float = 0.0
    started_s: float = 0.0
    body: Any = None  # with keep_body: the parsed JSON, or the text
    events: list[tuple[str, float]] | None = None  # an SSE answer: (event, seconds after the request started)
    error: str = ""  # no answer: the exception (type and message) the client raised

    @property
    def key(self) -> str:
        """The name it is counted under: the status, or the failure."""
        return str(self.status) if self.status is not None else self.failure

    @property
    def plain_5xx(self) -> bool:
        """A 5xx whose body is not JSON (what no error path of ours should ever send)."""
        return self.status is not None and self.status >= 500 and not self.json_body

    @property
    def stream_done(self) -> bool | None:
        """An SSE answer: whether it ended with its ``done`` event (None: not a stream)."""
        return None if self.events is None else any(name == "done" for name, _ in self.events)

    def first_event_s(self, name: str) -> float | None:
        """Seconds from the request's start to its first ``name`` event (None: none came)."""
        return next((t for n, t in self.events or [] if n == name), None)


@dataclass
class LoadResult:
    """Every outcome of one bounded load, indexed as the requests were made."""

    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    def counts(self) -> dict[str, int]:
        """Outcomes counted by status or failure."""
        return dict(sorted(Counter(o.key for o in self.outcomes).items()))

    def failures(self, limit: int = 5) -> list[dict[str, Any]]:
        """The first ``limit`` requests that got no answer: how, when (seconds into the load) and the error."""
        return [{"failure": o.failure, "started_s": round(o.started_s, 2), "latency_s": round(o.latency_s, 2),
                 "error": o.error} for o in self.outcomes if o.status is None and o.failure != NOT_SENT][:limit]

    def latencies(self, status: int | None = None) -> list[float]:
        """Seconds of every answered request (only those answering ``status``, if given)."""
        return [o.latency_s for o in self.outcomes
                if o.status is not None and (status is None or o.status == status)]

    def answered(self) -> int:
        """Requests that got an HTTP answer."""
        return sum(o.status is not None for o in self.outcomes)

    def per_s(self) -> float:
        """Answered requests per second of the load's wall time."""
        return self.answered() / self.wall_s if self.wall_s else 0.0

    def plain_5xx(self) -> int:
        """Plain-text (non-JSON) 5xx answers."""
        return sum(o.plain_5xx for o in self.outcomes)


def require_loopback(url: httpx.URL | str) -> None:
    """Raise ``ValueError`` unless ``url`` points at this machine's loopback interface."""
    host = httpx.URL(url).host
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the load generator sends to loopback only, not to {host!r}")


def failure_of(exc: BaseException) -> str:
    """How a request that got no answer failed."""
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "refused"
    return "reset"  # the connection closed without an answer (RemoteProtocolError, ReadError, ...)


async def _answer(resp: httpx.Response, started: float, keep_body: bool) -> Outcome:
    """Read an answer to its end: JSON and Retry-After noted, an event stream's events timed."""
    content_type = resp.headers.get("content-type", "")
    out = Outcome(resp.status_code, retry_after="retry-after" in resp.headers)
    if "text/event-stream" in content_type:
        out.events = []
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                out.events.append((line[6:].strip(), time.perf_counter() - started))
    else:
        await resp.aread()
        if "json" in content_type:
            try:
                out.body = resp.json()
                out.json_body = True
            except ValueError:
                pass
        if keep_body and not out.json_body:
            out.body = resp.text
        elif not keep_body:
            out.body = None
    return out


async def arun_load(base: str | Sequence[str], n: int, concurrency: int, make: Callable[[int], Request], *,
                    rate_per_s: float | None = None, timeout_s: float = 30.0, time_limit_s: float = 300.0,
                    keep_body: bool = False) -> LoadResult:
    """Send ``make(i)`` for i < ``n``, ``concurrency`` at a time; request i goes to ``base[i % len(base)]``.

    ``rate_per_s`` paces the starts (request i no earlier than i / rate); none starts after ``time_limit_s``
    and none lasts longer than ``timeout_s``.
    """
    bases = [base] if isinstance(base, str) else list(base)
    for b in bases:
        require_loopback(b)
    result = LoadResult(outcomes=[Outcome(None, NOT_SENT) for _ in range(n)])
    counter = iter(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    clients = [httpx.AsyncClient(base_url=b, timeout=timeout_s, limits=limits) for b in bases]
    t0 = time.perf_counter()
    end = t0 + time_limit_s

    async def one(i: int) -> Outcome:
        client = clients[i % len(clients)]
        method, path, kwargs = make(i)
        started = time.perf_counter()
        try:
            request = client.build_request(method, path, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a request the client will not build is an outcome too
            return Outcome(None, "unsent", started_s=started - t0, error=f"{type(exc).__name__}: {exc}")
        require_loopback(request.url)
        try:
            async with asyncio.timeout(timeout_s):
                resp = await client.send(request, stream=True)
                try:
                    out = await _answer(resp, started, keep_body)
                finally:
                    await resp.aclose()
        except (httpx.HTTPError, TimeoutError) as exc:
            out = Outcome(None, failure_of(exc), error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the client refused to send it (a header it rejects, ...)
            out = Outcome(None, "unsent", error=f"{type(exc).__name__}: {exc}")
        out.latency_s, out.started_s = time.perf_counter() - started, started - t0
        return out

    async def worker() -> None:
        for i in counter:
            if rate_per_s:  # paced: request i starts no earlier than i / rate
                await asyncio.sleep(max(0.0, min(t0 + i / rate_per_s, end) - time.perf_counter()))
            if time.perf_counter() >= end:
                return
            result.outcomes[i] = await one(i)

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        for client in clients:
            await client.aclose()
    result.wall_s = time.perf_counter() - t0
    return result


def run_load(base: str | Sequence[str], n: int, concurrency: int, make: Callable[[int], Request], *,
             rate_per_s: float | None = None, timeout_s: float = 30.0, time_limit_s: float = 300.0,
             keep_body: bool = False) -> LoadResult:
    """:func:`arun_load` from synchronous code (its own event loop)."""
    return asyncio.run(arun_load(base, n, concurrency, make, rate_per_s=rate_per_s, timeout_s=timeout_s,
                                 time_limit_s=time_limit_s, keep_body=keep_body))
