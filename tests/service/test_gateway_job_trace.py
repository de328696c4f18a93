"""The gateway's ingest and reindex jobs run in their own traces, linked to the request that submitted them.

The gateway app over the real embedding and retrieval servers (port 0), driven over HTTP (ASGI); its
job store is the real MemoryJobs given the test's tracer provider (the composition root lets tests
bring their own job store), spans read from an in-memory exporter.
"""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from support import eventually_async, job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_retrieval

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_ingest_and_reindex_job_spans_link_to_their_requests(embedding_service, tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with running_retrieval(tmp_path / "qdrant", embedding_service.port) as retrieval:
        app = gateway_app(embedding_service.port, retrieval.port, tracer_provider=provider)  # no Redis: MemoryJobs
        jobs = await _run_both_jobs(app, exporter)
    requests = {s.name: s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER}
    for route, (name, span) in jobs.items():
        request = requests[route]
        assert span.name == name and span.parent is None and span.context.trace_id != request.context.trace_id
        assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
            (request.context.trace_id, request.context.span_id)]


async def _run_both_jobs(app, exporter: InMemorySpanExporter) -> dict:
    """Ingest, then reindex, over HTTP; submitting route -> (expected span name, the job's ended span)."""
    async with asgi_client(app) as http:
        assert (await http.post("/v1/collections", json={"name": "traced"})).status_code == 201
        ingest = (await http.post("/v1/collections/traced/documents", json={"documents": [
            {"id": "t1", "text": "제주 감귤 선물 세트"}, {"id": "t2", "text": "겨울 여행 가이드북"}]})).json()
        assert (await job_finished(http, f"/v1/jobs/{ingest['id']}"))["state"] == "succeeded"
        reindex = (await http.post("/v1/collections/traced/reindex")).json()
        assert (await job_finished(http, f"/v1/jobs/{reindex['id']}"))["state"] == "succeeded"

        async def job_spans():
            return {s.attributes["mesh.job.id"]: s for s in exporter.get_finished_spans() if s.name.endswith(".job")}

        spans = await eventually_async(job_spans, lambda found: {ingest["id"], reindex["id"]} <= set(found),
                                       what="both job spans ended")
    return {"POST /v1/collections/{name}/documents": ("ingest.job", spans[ingest["id"]]),
            "POST /v1/collections/{name}/reindex": ("reindex.job", spans[reindex["id"]])}
