"""Tracing set-up of every process: one tracer provider, configured by the standard OTel variables.

Tracing configured is tracing on: an OTLP exporter whose receiver is not up yet (``make run`` before
``make ops``) keeps trying with every batch, spans wait in a bounded queue meanwhile, and what is
dropped is counted (``mesh_trace_spans_dropped_total`` by reason, beside ``..._exported_total``), so
the order in which a process and its trace backend start does not matter.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.instrumentation.grpc import filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter, SpanExportResult
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from services.runtime.errors import StartupError


class SpanCounts:
    """Spans exported and dropped by this process's exporters (Prometheus counters)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.exported = Counter("mesh_trace_spans_exported", "spans the trace exporter delivered", registry=registry)
        self.dropped = Counter("mesh_trace_spans_dropped", "spans lost before delivery, by reason (export_failed: "
                               "the receiver was unreachable or refused them; queue_full)", ["reason"],
                               registry=registry)
        for reason in ("export_failed", "queue_full"):
            self.dropped.labels(reason)


_COUNTS: SpanCounts | None = None


def span_counts() -> SpanCounts:
    """The process's span counters (registered once, whatever the number of providers)."""
    global _COUNTS
    if _COUNTS is None:
        _COUNTS = SpanCounts()
    return _COUNTS


class CountingExporter(SpanExporter):
    """An exporter that counts what it delivered and what it lost; each batch is a fresh attempt."""

    def __init__(self, inner: SpanExporter, counts: SpanCounts) -> None:
        self.inner = inner
        self.counts = counts

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:  # noqa: D102
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - an exporter must never take the process down
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.counts.exported.inc(len(spans))
        else:
            self.counts.dropped.labels("export_failed").inc(len(spans))
        return result

    def shutdown(self) -> None:  # noqa: D102
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:  # noqa: D102
        return self.inner.force_flush(timeout_millis)


class BoundedBatchProcessor(BatchSpanProcessor):
    """The SDK's batch processor (bounded queue), counting the spans a full queue drops."""

    def __init__(self, exporter: SpanExporter, counts: SpanCounts) -> None:
        super().__init__(exporter)
        self._counts = counts
        self._max_queue = BatchSpanProcessor._default_max_queue_size()

    def on_end(self, span: ReadableSpan) -> None:  # noqa: D102
        queue = getattr(getattr(self, "_batch_processor", None), "_queue", None)
        if queue is not None and len(queue) >= self._max_queue:
            self._counts.dropped.labels("queue_full").inc()
        super().on_end(span)


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
            counts = span_counts()
            provider.add_span_processor(BoundedBatchProcessor(CountingExporter(_otlp_exporter(), counts), counts))
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


