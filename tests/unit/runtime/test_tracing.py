"""Tracing configured is tracing on: spans sent before the receiver is up are counted as dropped, and
the same exporter delivers once the receiver listens (no restart, no decision taken once)."""

from __future__ import annotations

from bench.standin import OtlpSink
from services.runtime.tracing import make_tracer_provider, span_counts
from support import eventually, free_port


def test_an_exporter_whose_receiver_starts_later_keeps_trying_and_counts_what_it_dropped(monkeypatch):
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # seconds: the unreachable batch fails fast
    provider = make_tracer_provider("trace-late-receiver", "otlp")
    counts = span_counts()
    dropped = counts.dropped.labels("export_failed")._value.get()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("before the receiver"):
        pass
    provider.force_flush(5000)
    assert counts.dropped.labels("export_failed")._value.get() == dropped + 1
    sink = OtlpSink(port=port)
    try:
        with tracer.start_as_current_span("after the receiver"):
            pass
        provider.force_flush(5000)
        names = eventually(lambda: [s["name"] for s in sink.spans], lambda got: "after the receiver" in got,
                           what="the span sent once the receiver listened")
        assert "before the receiver" not in names
    finally:
        provider.shutdown()
        sink.close()
