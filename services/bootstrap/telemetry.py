"""Tracing and metrics for every service process: OTel server interceptor, Prometheus endpoint."""

from __future__ import annotations

import logging
import time
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0)


def make_tracer_provider(service_name: str, exporter: str) -> TracerProvider:
    """A tracer provider for one process; ``exporter`` is ``none``, ``console`` or ``otlp``."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as exc:  # optional dependency, named in the README
            raise SystemExit("trace exporter 'otlp' needs opentelemetry-exporter-otlp-proto-grpc") from exc
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def tracing_interceptor(provider: trace.TracerProvider) -> grpc.aio.ServerInterceptor:
    """OTel's aio server interceptor, with health checks left out of traces."""
    return aio_server_interceptor(tracer_provider=provider, filter_=filters.negate(filters.health_check()))


class RpcMetrics:
    """Prometheus RPC counters and latency histogram of one process (by method and status)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.latency = Histogram("mesh_grpc_server_handling_seconds", "RPC handling time",
                                 ["method", "code"], buckets=LATENCY_BUCKETS, registry=registry)
        self.requests = Counter("mesh_grpc_server_handled", "RPCs handled", ["method", "code"],
                                registry=registry)


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Times unary RPCs and counts every RPC by its final status code."""

    def __init__(self, metrics: RpcMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(self, continuation, handler_call_details):  # noqa: D102
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method
        inner = handler.unary_unary
        metrics = self.metrics

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                code = (context.code() or grpc.StatusCode.UNKNOWN).name
                raise
            finally:
                metrics.latency.labels(method, code).observe(time.perf_counter() - start)
                metrics.requests.labels(method, code).inc()

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def start_metrics_endpoint(host: str, port: int, registry: CollectorRegistry = REGISTRY):
    """Serve ``/metrics`` on its own port (a negative port disables it); returns the bound port."""
    if port < 0:
        return None, None
    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound = server.server_address[1]
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return server, bound
