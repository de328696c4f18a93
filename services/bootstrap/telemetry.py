"""Tracing and metrics of every gRPC server: the OTel server interceptor, RPC metrics, the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

from services.runtime.errors import StartupError
from services.runtime.limits import register_process_limits

log = logging.getLogger(__name__)

# Up to two minutes: LLM streams and OCR jobs run for tens of seconds, and the p95 > 10 s / p99 > 30 s
# alerts need buckets above their thresholds.
LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)


def tracing_interceptor(provider: trace.TracerProvider) -> grpc.aio.ServerInterceptor:
    """OTel's aio server interceptor, with health checks left out of traces."""
    return aio_server_interceptor(tracer_provider=provider, filter_=filters.negate(filters.health_check()))


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


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts, times and counts the messages of every RPC — unary and streaming — by its final status code."""

    def __init__(self, metrics: RpcMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(self, continuation, handler_call_details):  # noqa: D102
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if method.startswith(("/grpc.health.", "/grpc.reflection.")):
            return handler
        metrics = self.metrics
        kind = rpc_kind(handler.request_streaming, handler.response_streaming)

        def finish(context: grpc.aio.ServicerContext, start: float, failed: BaseException | None) -> None:
            if isinstance(failed, asyncio.CancelledError | GeneratorExit):
                code = "CANCELLED"  # the caller went away or its deadline passed: not a server error
            elif failed is not None:
                code = (context.code() or grpc.StatusCode.UNKNOWN).name
            else:
                code = (context.code() or grpc.StatusCode.OK).name
            metrics.latency.labels(method, code).observe(time.perf_counter() - start)
            metrics.requests.labels(method, code).inc()

        async def counted(requests: Any) -> Any:
            async for request in requests:
                metrics.received.labels(method).inc()
                yield request

        async def answered(call: Any, arg: Any, context: grpc.aio.ServicerContext) -> Any:
            """A call with one response (unary, client stream): timed and counted by its final code."""
            start = time.perf_counter()
            failed: BaseException | None = None
            metrics.started.labels(method, kind).inc()
            try:
                return await call(arg, context)
            except BaseException as exc:
                failed = exc
                raise
            finally:
                finish(context, start, failed)

        if kind == "unary":
            inner_unary = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                return await answered(inner_unary, request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)

        inner = handler.unary_stream or handler.stream_unary or handler.stream_stream

        if handler.response_streaming:
            async def streaming(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> Any:
                start = time.perf_counter()
                failed: BaseException | None = None
                metrics.started.labels(method, kind).inc()
                arg = counted(request_or_iterator) if handler.request_streaming else request_or_iterator
                try:
                    async for response in inner(arg, context):
                        metrics.sent.labels(method).inc()
                        yield response
                except BaseException as exc:
                    failed = exc
                    raise
                finally:
                    finish(context, start, failed)

            make = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                    else grpc.unary_stream_rpc_method_handler)
            return make(streaming, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)

        async def client_stream(request_iterator: Any, context: grpc.aio.ServicerContext) -> Any:
            return await answered(inner, counted(request_iterator), context)

        return grpc.stream_unary_rpc_method_handler(
            client_stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


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
