"""The gateway's ingest and reindex jobs run in their own traces, linked to the request that submitted them.

The gateway app over the real embedding and retrieval servers (port 0), driven over HTTP (ASGI); its
job store is the real MemoryJobs given the test's tracer provider (the composition root lets tests
bring their own job store), spans read from an in-memory exporter.
"""

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.vectors.cache import LocalLruCache
from gateway.wiring import build_mesh
from services.bootstrap.lifecycle import running
from services.retrieval.config import RetrievalSettings
from services.retrieval.server import create_retrieval_service
from support import eventually_async, job_finished

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_ingest_and_reindex_job_spans_link_to_their_requests(embedding_service, tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    embedding = f"127.0.0.1:{embedding_service.port}"
    retrieval = await create_retrieval_service(
        RetrievalSettings(port=0, qdrant_location=str(tmp_path / "qdrant"), embedding_target=embedding),
        registry=CollectorRegistry())
    async with running(retrieval):
        settings = GatewaySettings(embedding_target=embedding, retrieval_target=f"127.0.0.1:{retrieval.port}")
        mesh = build_mesh(settings, cache=LocalLruCache(100), tracer_provider=provider)  # no Redis: MemoryJobs
        jobs = await _run_both_jobs(create_app(settings, mesh, tracer_provider=provider), exporter)
    requests = {s.name: s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER}
    for route, (name, span) in jobs.items():
        request = requests[route]
        assert span.name == name and span.parent is None and span.context.trace_id != request.context.trace_id
        assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
            (request.context.trace_id, request.context.span_id)]


async def _run_both_jobs(app, exporter: InMemorySpanExporter) -> dict:
    """Ingest, then reindex, over HTTP; submitting route -> (expected span name, the job's ended span)."""
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
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
