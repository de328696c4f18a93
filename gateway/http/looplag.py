"""How late the event loop runs: a timer due every few milliseconds, its delay recorded.

Everything a gateway process serves shares one event loop, so any synchronous step on it (parsing a
large body, packing passages, encoding a big response) delays every other request by as long. A timer
that is due every ``every_s`` and fires late by ``lag`` shows such a stall (to within ``every_s``):
``mesh_gateway_event_loop_lag_seconds`` is the distribution, read per route in bench/results/loop_lag.md.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Histogram

LAG = Histogram("mesh_gateway_event_loop_lag_seconds",
                "how late the event loop ran a timer (a stall of every request on this process)",
                buckets=(0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))


async def watch_loop(every_s: float) -> None:
    """Record the loop's lag every ``every_s`` until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + every_s
        await asyncio.sleep(every_s)
        LAG.observe(max(0.0, loop.time() - due))


def warm_routes(app) -> int:
    """Build every route's lazily made state now (response models, the OpenAPI document) instead of on first use.

    FastAPI 0.16x builds each route's effective context — response fields, their pydantic validators —
    the first time the routes are walked, which the first request does (routing, and the OpenTelemetry
    instrumentation naming its span): ~0.2 s on the event loop, stalling everything else. Called at start
    in a worker thread, before the gateway serves (the build holds FastAPI's own lock). Returns the count.
    """
    import fastapi.routing

    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    count = sum(1 for _ in walk(app.routes)) if walk is not None else 0
    app.openapi()  # the served spec, generated once (~0.5 s of pydantic schema building) before the first GET
    return count
