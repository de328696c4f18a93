"""Health per capability on real servers (port 0): a dependency down, then back, in every service.

The dependency-down matrix: Redis under OCR jobs, the LLM backend under reasoning, the embedding
service under retrieval's dense search and ingest, and every one of them seen from the gateway's
``/readyz``. States are awaited through the health protocol's ``Watch`` stream (events, no sleeps).
"""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mesh.ocr.v1 import ocr_pb2 as opb
from mesh.ocr.v1 import ocr_pb2_grpc as opb_grpc
from mesh.retrieval.v1 import retrieval_pb2 as rpb
from mesh.retrieval.v1 import retrieval_pb2_grpc as rpb_grpc

from bench.standin import ChatStandIn
from clients import health as names
from services.reasoning.backends.openai_http import OpenAIBackend
from services.runtime.processes import start_redis, stop_process
from support import eventually_async, free_port
from support.apps import asgi_client, gateway_app
from support.servers import running_embedding, running_ocr, running_reasoning, running_retrieval
from support.waiting import health_becomes

pytestmark = pytest.mark.asyncio(loop_scope="session")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
PROBE_S = 0.2  # health_interval_s in these tests


async def status(channel: grpc.aio.Channel, service: str) -> int:
    """The current health of ``service``."""
    resp = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
    return resp.status


async def test_ocr_extract_serves_without_redis_and_jobs_follow_redis(tmp_path, caplog):
    port = free_port()
    caplog.set_level(logging.INFO)
    redis = None
    async with running_ocr(engines=1, job_workers=1, redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout_s=0.5,
                           health_interval_s=PROBE_S) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        try:
            stub = opb_grpc.OcrServiceStub(channel)
            assert await status(channel, "") == SERVING and await status(channel, names.OCR) == SERVING
            assert await status(channel, names.OCR_JOBS) == NOT_SERVING
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.SubmitJob(opb.SubmitJobRequest(contents=[_png()]), timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            extracted = await stub.Extract(opb.ExtractRequest(content=_png()), timeout=30)
            assert extracted.pages[0].engine  # Extract answers with Redis down

            assert await healthcheck_cli(service.port, names.OCR_JOBS) == (1, "NOT_SERVING")
            redis, _ = await asyncio.to_thread(start_redis, tmp_path / "redis", port)
            await health_becomes(channel, names.OCR_JOBS, SERVING)
            assert await healthcheck_cli(service.port, names.OCR_JOBS) == (0, "SERVING")
            job = await stub.SubmitJob(opb.SubmitJobRequest(contents=[_png()]), timeout=10)

            async def job_state():  # the job workers resumed by themselves (polling is the jobs API)
                return (await stub.GetJob(opb.GetJobRequest(job_id=job.job.job_id), timeout=5)).job

            finished = (opb.JOB_STATE_SUCCEEDED, opb.JOB_STATE_FAILED)
            state = await eventually_async(job_state, lambda j: j.state in finished, what="the OCR job finished")
            assert state.state == opb.JOB_STATE_SUCCEEDED, state

            await asyncio.to_thread(stop_process, redis, 5)
            await health_becomes(channel, names.OCR_JOBS, NOT_SERVING)
            assert await status(channel, names.OCR) == SERVING
            # Ten probe rounds and worker retries with Redis down: the log must not grow with them.
            await probe_rounds(service.mesh.monitor, 10)
            downs = [r for r in caplog.records if "dependency redis is down" in r.getMessage()]
            assert len(downs) == 2, [r.getMessage() for r in downs]  # once at start, once after the kill
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "heartbeat" in r.getMessage()]
        finally:
            if redis is not None:
                await asyncio.to_thread(stop_process, redis, 5)


async def probe_rounds(monitor, rounds: int, timeout_s: float = 30.0) -> None:
    """Return once ``monitor`` (the service's real DependencyMonitor) has finished ``rounds`` more probe rounds."""
    done = 0
    enough = asyncio.Event()
    probe_all = monitor.probe_all

    async def counted() -> None:
        nonlocal done
        await probe_all()
        done += 1
        if done >= rounds:
            enough.set()

    monitor.probe_all = counted
    try:
        await asyncio.wait_for(enough.wait(), timeout_s)
    finally:
        del monitor.probe_all


async def healthcheck_cli(port: int, service: str) -> tuple[int, str]:
    """``python -m clients.healthcheck`` as an operator runs it: exit code and printed state."""
    import sys

    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "clients.healthcheck", f"127.0.0.1:{port}",
                                                service, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode().strip()


def _png() -> bytes:
    import io

    from PIL import Image, ImageDraw

    img = Image.new("L", (240, 60), 255)
    ImageDraw.Draw(img).text((10, 20), "health 123", fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


async def test_reasoning_is_serving_only_while_a_backend_answers():
    port = free_port()
    backends = [OpenAIBackend("down", f"http://127.0.0.1:{free_port()}/v1", "standin"),
                OpenAIBackend("later", f"http://127.0.0.1:{port}/v1", "standin")]
    standin = None
    async with running_reasoning(backends, health_interval_s=PROBE_S) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        try:
            assert await status(channel, "") == NOT_SERVING and await status(channel, names.REASONING) == NOT_SERVING
            standin = ChatStandIn([{"chunks": ["네"]}], port=port)  # the fallback comes up: "any" backend suffices
            await health_becomes(channel, names.REASONING, SERVING)
            assert await status(channel, "") == SERVING
            standin.close()
            standin = None
            await health_becomes(channel, names.REASONING, NOT_SERVING)
        finally:
            if standin is not None:
                standin.close()


async def test_retrieval_keyword_serves_without_embedding_and_dense_follows_it(tmp_path, model_dir):
    port = free_port()
    async with running_retrieval(tmp_path / "q", port, health_interval_s=PROBE_S) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        assert await status(channel, names.RETRIEVAL) == SERVING  # keyword search needs nothing else
        assert await status(channel, names.RETRIEVAL_DENSE) == NOT_SERVING
        assert await status(channel, names.RETRIEVAL_INGEST) == NOT_SERVING
        async with running_embedding(model_dir, port=port):
            await health_becomes(channel, names.RETRIEVAL_DENSE, SERVING)
            assert await status(channel, names.RETRIEVAL_INGEST) == SERVING
            stub = rpb_grpc.RetrievalServiceStub(channel)
            await stub.CreateCollection(rpb.CreateCollectionRequest(name="h"), timeout=30)
            await stub.UpsertDocuments(rpb.UpsertDocumentsRequest(collection="h", documents=[
                rpb.Document(id="1", text="원목 캠핑 테이블")]), timeout=30)

        await health_becomes(channel, names.RETRIEVAL_DENSE, NOT_SERVING)
        assert await status(channel, names.RETRIEVAL) == SERVING
        resp = await stub.Search(rpb.SearchRequest(collection="h", query="캠핑 테이블", mode=rpb.SEARCH_MODE_KEYWORD),
                                 timeout=10)
        assert resp.hits[0].id == "1"
        async with running_embedding(model_dir, port=port):  # back by itself, no restart of retrieval
            await health_becomes(channel, names.RETRIEVAL_DENSE, SERVING)


async def test_gateway_readyz_reports_every_dependency_through_the_clients(embedding_service, tmp_path):
    async with running_retrieval(tmp_path / "q", embedding_service.port, health_interval_s=PROBE_S) as retrieval:
        # The embedding service shares this test's event loop: retrieval's first probe can time out while
        # retrieval itself starts on that loop. Its monitor probes again every PROBE_S; wait for that, then compare.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{retrieval.port}") as channel:
            await health_becomes(channel, names.RETRIEVAL_DENSE, SERVING)
        dead = f"127.0.0.1:{free_port()}"
        for target, status_, code in ((f"127.0.0.1:{embedding_service.port}", "ok", 200), (dead, "degraded", 200)):
            app = gateway_app(target, retrieval.port, ocr_target=dead, reasoning_targets=dead)
            async with asgi_client(app) as http:
                r = await http.get("/readyz")
                body = r.json()
                assert r.status_code == code and body["status"] == status_, body
                assert body["services"]["retrieval"] == "SERVING" and body["services"]["retrieval.dense"] == "SERVING"
                assert body["services"]["embedding"] == ("SERVING" if status_ == "ok" else "UNREACHABLE")
                assert body["services"]["ocr"] == body["services"]["ocr.jobs"] == "UNREACHABLE"
                assert body["services"]["reasoning"] == "UNREACHABLE" and body["services"]["cache"] == "SERVING"
        async with asgi_client(gateway_app(embedding_service.port, free_port())) as http:  # retrieval down: not ready
            r = await http.get("/readyz")
            assert r.status_code == 503 and r.json()["status"] == "unavailable"
