"""Hostile files never stall the OCR service (issue 75): each a named 4xx or a bounded answer, health answered.

Real OCR, embedding and retrieval services on port 0, the gateway in process; the files are made by
bench/hostile_set.py. While each hostile file is read through ``/v1/files:read``, the OCR service's gRPC
health check is called every 100 ms: every call must answer within 1 s (the service shares this test's
event loop, so the loop guard in tests/conftest.py also fails any callback that holds it over 200 ms).
Every input that once stalled a service is kept here.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import hostile_set as hostile
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _cases() -> list[tuple[str, bytes, int, str]]:
    """(name, file, status expected, a word of the answer)."""
    return [
        ("281-byte HTML comments", hostile.html_comments(40), 200, "text"),
        ("200 pages sharing one 2 MB text stream", hostile.pdf_shared_stream(200, 2_000_000), 400,
         "over the limit of 100,000 a page"),
        ("a page of 90,000 characters", hostile.pdf_dense_page(90_000), 200, "pdf"),
        ("DOCX of 4 MB XML, 1.6 M characters", hostile.docx_inflated(40_000), 200, "docx"),
        ("DOCX of 20 MB XML, 8 M characters", hostile.docx_inflated(200_000), 400,
         "over the limit of 2,000,000|the work budget"),  # whichever comes first: both named
        ("HTML nested 100,000 deep", hostile.html_nested(100_000), 200, "html"),
    ]


CASES = _cases()
BODIES = {name: json.dumps({"content_base64": base64.b64encode(data).decode()}).encode() for name, data, _, _ in CASES}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ocr(redis_url):
    db = redis_url.rsplit("/", 1)[0] + "/7"
    async with running_ocr(engines=1, redis_url=db, job_workers=1, max_xml_bytes=40_000_000) as svc:
        yield svc


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http(ocr, redis_url, embedding_service, retrieval_port):
    app = gateway_app(embedding_service.port, retrieval_port, ocr_target=f"127.0.0.1:{ocr.port}",
                      redis_url=redis_url.rsplit("/", 1)[0] + "/8", max_queued_file_bytes=300_000)
    async with asgi_client(app) as client:
        yield client


async def _health_while(port: int, work) -> tuple[object, list[float]]:
    """``work`` awaited while the service's health check is called every 100 ms; its result and each call's time."""
    times: list[float] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        task = asyncio.ensure_future(work)
        while not task.done():
            t = time.perf_counter()
            await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            times.append(time.perf_counter() - t)
            await asyncio.sleep(0.1)
        return await task, times


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_each_hostile_file_is_answered_in_bounds_while_health_answers(http, ocr, case):
    name, data, status, word = case
    body = BODIES[name]  # encoded at import: this test's own JSON encoding is not the service's work
    t = time.perf_counter()
    response, health = await _health_while(ocr.port, http.post("/v1/files:read", content=body, timeout=60,
                                                               headers={"content-type": "application/json"}))
    took = time.perf_counter() - t
    assert response.status_code == status and re.search(word, response.text), (name, response.status_code,
                                                                                response.text[:300])
    assert took < 10, (name, took)
    # In this process the gateway, the OCR service and the test share one GIL and a heap whose full collections
    # take ~1 s late in the suite; the target of 1 s is the service as its own process (bench.hostile: 49 ms at
    # most, and tests/system/test_ocr_fuzz_process.py). Here: well under the 10 s the case may take.
    assert health and max(health) < 2.5, (name, max(health))


async def test_a_scan_under_a_misreading_text_layer_is_masked_from_its_image(http):
    """A scanner's searchable PDF: the layer misread the resident number; the image is read too."""
    data = await asyncio.to_thread(hostile.scanned_with_layer, ["성명: 김하늘", "주민등록번호: 900101-1234567"],
                                   ["Name: Kim", "9OO1O1-l234567"])
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": base64.b64encode(data).decode()}],
                                                  "pictures": False})
    assert r.status_code == 202, r.text
    job = await job_finished(http, r.headers["Location"], timeout_s=120)
    assert job["state"] == "succeeded", job
    found = job["result"]["pages"][0]["entities"]
    assert any(e["kind"] == "resident_number" and "1234567" in e["text"] for e in found), found


async def test_file_uploads_queued_for_ingest_are_bounded_and_released(http):
    """The gateway here may hold 300,000 bytes of queued uploads (--max-queued-file-bytes)."""
    r = await http.post("/v1/collections", json={"name": "hostile"})
    assert r.status_code == 201, r.text
    big = hostile.docx_inflated(5_000)
    assert len(big) > 300_000
    refused = await http.post("/v1/collections/hostile/files", json={"content_base64": base64.b64encode(big).decode()})
    assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1, refused.text
    assert "--max-queued-file-bytes" in refused.text
    small = hostile.docx_inflated(200)
    for _ in range(2):  # each one's bytes are counted out when its job ends, so the next fits again
        r = await http.post("/v1/collections/hostile/files", json={"content_base64": base64.b64encode(small).decode()})
        assert r.status_code == 202, r.text
        assert (await job_finished(http, f"/v1/jobs/{r.json()['id']}"))["state"] == "succeeded"
        small += b" "
