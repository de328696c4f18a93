"""The gateway app in the test's process: built over given service targets, driven over ASGI or uvicorn.

One builder (:func:`gateway_app`) for every test that wires the gateway to real services on port 0;
:func:`asgi_client` starts an app (its lifespan) and talks to it without sockets; :func:`serving`
puts it under uvicorn on a real port, for clients that need one (schemathesis).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from opentelemetry.trace import TracerProvider

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.http.streams import parse
from gateway.vectors.cache import EmbeddingCache, LocalLruCache
from gateway.wiring import build_mesh
from services.runtime.loopguard import starting
from support.ports import listening_socket
from support.sse import checked_events


def target(where: str | int) -> str:
    """A gRPC target: ``where`` itself, or ``127.0.0.1:<where>`` for a port number."""
    return f"127.0.0.1:{where}" if isinstance(where, int) else where


def gateway_app(embedding: str | int, retrieval: str | int, cache: EmbeddingCache | None = None,
                tracer_provider: TracerProvider | None = None, **settings: Any) -> FastAPI:
    """The gateway over the embedding and retrieval services at ``embedding`` / ``retrieval`` (targets or ports).

    ``settings`` are GatewaySettings fields. The cache is ``cache`` when given; else the Redis the settings
    name (``redis_url``), as the gateway itself chooses; else in process (an LRU). ``tracer_provider``
    traces the app and its job store.
    """
    config = GatewaySettings(embedding_target=target(embedding), retrieval_target=target(retrieval), **settings)
    if cache is None and not config.redis_url:
        cache = LocalLruCache(1000)
    with starting():  # building the mesh (task files, templates, schemas) is start-up: no request is served yet
        return create_app(config, build_mesh(config, cache=cache, tracer_provider=tracer_provider),
                          tracer_provider=tracer_provider)


@asynccontextmanager
async def asgi_client(app: FastAPI, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` started (its lifespan runs) and an httpx client to it over ASGI (``http://gw``), for the block.

    The start-up is outside the event-loop guard (``starting``), as a gateway process serves once it started.
    """
    async with AsyncExitStack() as stack:
        with starting():
            await stack.enter_async_context(app.router.lifespan_context(app))
            http = await stack.enter_async_context(
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw", **options))
        yield http


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """``app`` under uvicorn on 127.0.0.1, port 0, on this event loop; yields its base URL."""
    with listening_socket() as sock:
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, log_config=None))
        with starting():  # the app's start-up (its lifespan) runs before uvicorn reports started
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:  # uvicorn offers no event for it
                if task.done():
                    task.result()  # raises what stopped it
                await asyncio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            await task


def parse_sse(body: httpx.Response | str) -> list[tuple[str, Any]]:
    """A whole server-sent-event body as (event, data) pairs.

    Given the response, every event is also checked against the operation's spec (tests/support/sse.py):
    an event or a field the spec does not declare fails the test that received it.
    """
    if isinstance(body, httpx.Response):
        return checked_events(body)
    return [(event, json.loads(data)) for event, data in parse(body)]
