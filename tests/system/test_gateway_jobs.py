"""Ingest jobs outlive the gateway that took them: two gateways on one Redis, one killed mid-ingest.

Real processes throughout (Redis, embedding, retrieval, two gateways). The job is submitted to
gateway A while it is the only instance (so A's workers take it); B starts, A is killed (SIGKILL,
no goodbye), B's reaper sees A's lease lapse and resumes the job from its last acknowledged batch;
A comes back; both report the same finished job and the collection holds every document once.
"""

import os
import signal

import httpx
import pytest

from services.runtime.processes import start_process, start_redis, stop_process
from support import eventually

pytestmark = pytest.mark.slow
DOCS = 1200
BATCH = 8


def gateway(emb: int, ret: int, redis_url: str):
    return start_process("gateway", "--port", "0", "--embedding-target", f"127.0.0.1:{emb}", "--retrieval-target",
                         f"127.0.0.1:{ret}", "--redis-url", redis_url, "--job-lease-s", "1.5")


def wait_for(http: httpx.Client, job_id: str, until, timeout_s: float = 120.0) -> dict:
    """The job's body once ``until`` holds for it (polled: the jobs API is the only view)."""
    return eventually(lambda: http.get(f"/v1/jobs/{job_id}").json(), until, timeout_s=timeout_s,
                      what="job reached the expected state")


def test_a_job_survives_its_gateway_and_both_gateways_report_it(tmp_path):
    procs = []
    try:
        redis, redis_url = start_redis(tmp_path / "redis")
        procs.append(redis)
        emb, emb_port = start_process("services.embedding", "--port", "0", "--intra-op-threads", "1")
        procs.append(emb)
        ret, ret_port = start_process("services.retrieval", "--port", "0", "--qdrant-location", str(tmp_path / "q"),
                                      "--embedding-target", f"127.0.0.1:{emb_port}")
        procs.append(ret)
        a, a_port = gateway(emb_port, ret_port, redis_url)
        procs.append(a)
        docs = [{"id": f"d{i}", "text": f"{i}번째 상품: 제주 감귤 선물 세트와 여행 가이드북"} for i in range(DOCS)]
        with httpx.Client(base_url=f"http://127.0.0.1:{a_port}", timeout=30) as http_a:
            assert http_a.post("/v1/collections", json={"name": "durable"}).status_code == 201
            r = http_a.post("/v1/collections/durable/documents", json={"documents": docs, "batch_size": BATCH})
            assert r.status_code == 202, r.text
            job_id = r.json()["id"]
            wait_for(http_a, job_id, lambda j: j["done"] >= 5 * BATCH)  # A holds it and is under way

        b, b_port = gateway(emb_port, ret_port, redis_url)
        procs.append(b)
        os.kill(a.pid, signal.SIGKILL)  # mid-ingest, no chance to hand the job back
        a.wait()
        with httpx.Client(base_url=f"http://127.0.0.1:{b_port}", timeout=30) as http_b:
            middle = http_b.get(f"/v1/jobs/{job_id}").json()
            assert middle["state"] == "running" and middle["done"] < DOCS, middle  # B sees A's job, unfinished
            done_b = wait_for(http_b, job_id, lambda j: j["state"] in ("succeeded", "failed"))
            assert done_b["state"] == "succeeded" and done_b["done"] == DOCS, done_b
            assert done_b["errors"] == [] and done_b["failed_batches"] == 0
            assert http_b.get("/v1/collections/durable").json()["documents"] == DOCS  # each one, once

        a2, a2_port = gateway(emb_port, ret_port, redis_url)  # A restarted
        procs.append(a2)
        with httpx.Client(base_url=f"http://127.0.0.1:{a2_port}", timeout=30) as http_a2:
            assert http_a2.get(f"/v1/jobs/{job_id}").json() == done_b
            cancelled = http_a2.post(f"/v1/jobs/{job_id}:cancel").json()
            assert cancelled["state"] == "succeeded"  # a finished job stays finished
    finally:
        for proc in reversed(procs):
            stop_process(proc)
