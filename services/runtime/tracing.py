"""Tracing set-up of every process: one tracer provider, configured by the standard OTel variables."""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.instrumentation.grpc import filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from services.runtime.errors import StartupError


def make_tracer_provider(service_name: str, exporter: str | None = None) -> TracerProvider:
    """A tracer provider for one process, configured by the standard OpenTelemetry variables.

    ``OTEL_SERVICE_NAME`` overrides ``service_name``; ``exporter`` (the process's setting) or else
    ``OTEL_TRACES_EXPORTER`` picks ``otlp``, ``console`` or ``none`` (comma-separated for several);
    OTLP reads ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` (``grpc``
    or ``http/protobuf``); the sampler comes from ``OTEL_TRACES_SAMPLER(_ARG)`` (default: parent-based,
    always on).
    """
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    kinds = exporter or os.environ.get("OTEL_TRACES_EXPORTER", "none")
    for kind in (k.strip() for k in kinds.split(",")):
        if kind == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif kind == "otlp":
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
        elif kind not in ("none", ""):
            raise StartupError(f"unknown trace exporter {kind!r} (--trace-exporter or OTEL_TRACES_EXPORTER): "
                               "use otlp, console or none")
    return provider


def _otlp_exporter() -> SpanExporter:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    raise StartupError(f"unsupported OTLP protocol {protocol!r} (OTEL_EXPORTER_OTLP_PROTOCOL): "
                       "use grpc or http/protobuf")


def instrument_process(provider: TracerProvider) -> None:
    """Make ``provider`` the process's and trace every outbound call (gRPC and httpx clients).

    gRPC clients carry W3C trace context and baggage in their metadata (health checks left out);
    httpx clients (LLM and VLM backends) carry the trace context in their headers.
    """
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorClient(filter_=filters.negate(filters.health_check())).instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)


