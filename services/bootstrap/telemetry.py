"""Tracing and metrics of every gRPC server: the server span and RPC metrics per method, the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import grpc
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

from services.runtime.errors import StartupError
from services.runtime.limits import register_process_limits

log = logging.getLogger(__name__)

# Up to two minutes: LLM streams and OCR jobs run for tens of seconds, and the p95 > 10 s / p99 > 30 s
# alerts need buckets above their thresholds.
LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)


class RpcMetrics:
    """Prometheus RPC metrics of one process: every RPC, streams included (by method, type and final code)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.started = Counter("mesh_grpc_server_started", "RPCs started", ["method", "type"], registry=registry)
        self.latency = Histogram("mesh_grpc_server_handling_seconds", "RPC handling time (streams: until the end)",
                                 ["method", "code"], buckets=LATENCY_BUCKETS, registry=registry)
        self.requests = Counter("mesh_grpc_server_handled", "RPCs finished, by status code", ["method", "code"],
                                registry=registry)
        self.received = Counter("mesh_grpc_server_msg_received", "stream messages received", ["method"],
                                registry=registry)
        self.sent = Counter("mesh_grpc_server_msg_sent", "stream messages sent", ["method"], registry=registry)
        register_process_limits(registry)

    def declare(self, methods: list[tuple[str, str]]) -> None:
        """Create the series of every method at zero, so dashboards and alerts see them before the first call."""
        for method, kind in methods:
            self.started.labels(method, kind)
            self.requests.labels(method, "OK")
            self.latency.labels(method, "OK")
            if kind != "unary":
                self.received.labels(method)
                self.sent.labels(method)


_KINDS = {(False, False): "unary", (False, True): "server_stream", (True, False): "client_stream",
          (True, True): "bidi_stream"}


def rpc_kind(client_streaming: bool, server_streaming: bool) -> str:
    """``unary``, ``server_stream``, ``client_stream`` or ``bidi_stream`` (the ``type`` label)."""
    return _KINDS[(client_streaming, server_streaming)]


def _code(context: grpc.aio.ServicerContext, failed: BaseException | None) -> grpc.StatusCode:
    """The RPC's final status: CANCELLED when the caller went away (not a server error)."""
    if isinstance(failed, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    return context.code() or (grpc.StatusCode.UNKNOWN if failed is not None else grpc.StatusCode.OK)


class RpcTelemetry:
    """The server span and the RPC metrics of every mesh RPC, applied where its handler is built.

    Not an interceptor: grpc.aio runs every interceptor's ``intercept_service`` and rebuilds the
    handler on each call, and OTel's wraps the servicer context in a proxy; measured here
    (bench/results/grpc_stack.md) the two interceptors added ~0.8 ms to an empty RPC. This wraps each method
    once, keeps its metric children, and opens one span per call named like OTel's (the full method,
    ``rpc.system``/``rpc.service``/``rpc.method``/``rpc.grpc.status_code``), its parent taken from
    the caller's W3C trace context. Health and reflection are not wrapped: they are not traced or
    counted. ``metrics`` or ``provider`` None leaves that half out.
    """

    def __init__(self, metrics: RpcMetrics | None, provider: trace.TracerProvider | None) -> None:
        self.metrics = metrics
        self.tracer = provider.get_tracer("mesh.grpc.server") if provider is not None else None

    def wrap(self, path: str, kind: str, behaviour: Any) -> Any:
        """``behaviour`` (a handler's function, of this method's streaming ``kind``) instrumented."""
        if self.metrics is None and self.tracer is None:
            return behaviour
        metrics, tracer = self.metrics, self.tracer
        service, name = path.lstrip("/").split("/", 1)
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
        started = metrics.started.labels(path, kind) if metrics is not None else None
        received = metrics.received.labels(path) if metrics is not None and kind != "unary" else None
        sent = metrics.sent.labels(path) if metrics is not None and kind != "unary" else None
        children: dict[grpc.StatusCode, tuple[Any, Any]] = {}

        @contextlib.contextmanager
        def observed(context: grpc.aio.ServicerContext) -> Iterator[list[BaseException]]:
            begin = time.perf_counter()
            if started is not None:
                started.inc()
            failed: list[BaseException] = []
            span_cm = (tracer.start_as_current_span(
                path, context=propagate.extract(dict(context.invocation_metadata() or ())),
                kind=trace.SpanKind.SERVER, attributes=attributes, record_exception=False,
                set_status_on_exception=False) if tracer is not None else contextlib.nullcontext())
            with span_cm as span:
                try:
                    yield failed
                except BaseException as exc:
                    failed.append(exc)
                    raise
                finally:
                    code = _code(context, failed[0] if failed else None)
                    if span is not None:
                        span.set_attribute("rpc.grpc.status_code", code.value[0])
                        if code is not grpc.StatusCode.OK:
                            span.set_status(Status(StatusCode.ERROR, f"{code.name}"))
                    if metrics is not None:
                        pair = children.get(code)
                        if pair is None:
                            pair = children[code] = (metrics.latency.labels(path, code.name),
                                                     metrics.requests.labels(path, code.name))
                        pair[0].observe(time.perf_counter() - begin)
                        pair[1].inc()

        async def counted(requests: Any) -> Any:
            async for request in requests:
                if received is not None:
                    received.inc()
                yield request

        if kind in ("unary", "client_stream"):
            async def answered(arg: Any, context: grpc.aio.ServicerContext) -> Any:
                with observed(context):
                    return await behaviour(counted(arg) if kind == "client_stream" else arg, context)
            return answered

        async def streaming(arg: Any, context: grpc.aio.ServicerContext) -> Any:
            with observed(context):
                async for response in behaviour(counted(arg) if kind == "bidi_stream" else arg, context):
                    if sent is not None:
                        sent.inc()
                    yield response
        return streaming


def start_metrics_endpoint(host: str, port: int, registry: CollectorRegistry = REGISTRY):
    """Serve ``/metrics`` on its own port (a negative port disables it); returns the bound port."""
    if port < 0:
        return None, None
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise StartupError(f"metrics port {port} on {host} cannot be bound ({exc.strerror}): stop the process "
                           "holding it, or choose another with --metrics-port") from exc
    bound = server.server_address[1]
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return server, bound
