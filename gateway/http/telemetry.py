"""Per-request telemetry at the gateway: request id, route template, latency metric, one JSON access line.

``RequestTelemetry`` (pure ASGI, outside every route) accepts ``X-Request-ID`` or makes one, returns
it, carries it to the services as W3C baggage, labels the latency histogram with the *route
template* (``/v1/collections/{name}``; ``unmatched`` for unknown paths, so label cardinality stays
bounded), and writes one access line per request, 5xx and exceptions included. Route code adds the
fields operators ask for (stage times, cache hit, degraded, TTFT, tokens) with :func:`note`, which
also puts them on the request's span. Never user text: ids, counts, flags and timings only.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
import uuid
from typing import Any

from opentelemetry import baggage, context, trace
from prometheus_client import Histogram
from starlette.routing import Match

from gateway.http.errors import ErrorBody, ErrorDetail
from services.runtime.limits import register_process_limits
from services.runtime.logs import REQUEST_ID_BAGGAGE, reset_request_id, set_request_id

LATENCY = Histogram("mesh_gateway_request_seconds", "request latency by route template and status",
                    ["route", "status"],
                    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120))
ACCESS = logging.getLogger("gateway.access")
register_process_limits()
REQUEST_ID_HEADER = "x-request-id"
_VALID_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_FIELDS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("mesh_access_fields", default=None)


def note(**fields: Any) -> None:
    """Add fields to this request's access line and attributes to its span (``mesh.<name>``)."""
    current = _FIELDS.get()
    if current is not None:
        current.update(fields)
    span = trace.get_current_span()
    for key, value in fields.items():
        if isinstance(value, bool | int | float | str):
            span.set_attribute(f"mesh.{key}", value)


def _flat(routes: list[Any]) -> list[Any]:
    """Routes with included routers expanded (FastAPI keeps an included router as one entry; ours have no prefix)."""
    out = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out += _flat(inner.routes) if inner is not None else [route]
    return out


def route_template(routes: list[Any], scope: dict) -> str:
    """The template of the route that served ``scope``, or ``unmatched``.

    FastAPI records the route that served a request in its scope; a request refused before routing
    (e.g. 401) is matched against the top-level routes instead.
    """
    served = scope.get("route")
    if served is not None and getattr(served, "path", None):
        return str(served.path)
    for route in _flat(routes):
        match, _ = route.matches(scope)
        if match == Match.FULL and getattr(route, "path", None):
            return str(route.path)
    return "unmatched"


class RequestTelemetry:
    """ASGI middleware: request id, route-template metrics and the access line for every HTTP request."""

    def __init__(self, app: Any, routes: list[Any], quiet: tuple[str, ...] = ("/healthz", "/readyz", "/metrics")):
        self.app = app
        self.routes = routes
        self.quiet = quiet

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:  # noqa: D102
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        given = headers.get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1")
        request_id = given if _VALID_ID.match(given) else uuid.uuid4().hex
        status = 500
        fields: dict[str, Any] = {}
        fields_token = _FIELDS.set(fields)
        id_token = set_request_id(request_id)
        # Baggage from outside is dropped at the edge: only the mesh's own request id travels on.
        ctx_token = context.attach(baggage.set_baggage(REQUEST_ID_BAGGAGE, request_id, context=baggage.clear()))
        trace.get_current_span().set_attribute("mesh.request_id", request_id)

        started = False
        failure: BaseException | None = None

        async def send_with_id(message: dict) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID_HEADER.encode(), request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except asyncio.CancelledError:
            # The server is stopping and the grace period ran out (or the client left): a request that
            # has not answered yet is told to retry elsewhere, not handed a bare 500.
            if not started:
                await _shutting_down(send_with_id)
            raise
        except Exception as exc:  # a bug, not a client error: the one error body, logged with its traceback
            failure = exc
            if started:  # a stream already under way cannot change its status: let the server close it
                raise
            await _internal_error(send_with_id, request_id)
        finally:
            elapsed = time.perf_counter() - start
            route = route_template(self.routes, scope)
            LATENCY.labels(route, str(status)).observe(elapsed)
            # Probes and scrapes are counted, never logged: a readiness probe every few seconds while a
            # dependency is down would bury the log (the dependency's state change is logged once).
            if scope.get("path") not in self.quiet:
                level = logging.ERROR if status >= 500 else logging.INFO
                ACCESS.log(level, "request", exc_info=failure, extra={
                    "method": scope.get("method"), "route": route, "status": status,
                    "latency_ms": round(elapsed * 1e3, 2), **fields})
            context.detach(ctx_token)
            reset_request_id(id_token)
            _FIELDS.reset(fields_token)


async def _internal_error(send: Any, request_id: str) -> None:
    """Answer 500 with the standard error body naming the request id (to quote when reporting it)."""
    body = ErrorBody(error=ErrorDetail(code="internal", retryable=False,
                                       message=f"internal error; quote request id {request_id} when reporting it"))
    raw = body.model_dump_json().encode()
    await send({"type": "http.response.start", "status": 500,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]})
    await send({"type": "http.response.body", "body": raw})


async def _shutting_down(send: Any) -> None:
    """Answer 503 + Retry-After: this instance is going away; another one (or this one, restarted) will serve."""
    body = ErrorBody(error=ErrorDetail(code="unavailable", retryable=True, retry_after_s=1.0,
                                       message="the gateway is shutting down; retry"))
    raw = body.model_dump_json().encode()
    try:
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
            (b"retry-after", b"1")]})
        await send({"type": "http.response.body", "body": raw})
    except Exception:  # noqa: BLE001 - the connection may already be gone
        pass
