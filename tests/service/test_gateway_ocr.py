"""Gateway OCR routes over a real OCR service (port 0, real Tesseract, real Redis)."""

from __future__ import annotations

import base64

import pytest
import pytest_asyncio

from bench.ocr_set import build_set, cer
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")
SAMPLES = {s.name: s for s in build_set(per_category=1)}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http(redis_url):
    db = redis_url.rsplit("/", 1)[0] + "/5"
    async with running_ocr(engines=1, redis_url=db, job_workers=1, max_pages=4) as svc:
        app = gateway_app(1, 1, ocr_target=f"127.0.0.1:{svc.port}", max_ocr_body_bytes=2_000_000)
        async with asgi_client(app) as client:
            yield client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_submit_then_poll_until_the_result(http):
    a, b = SAMPLES["paragraph-00"], SAMPLES["receipt-00"]
    r = await http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": b64(a.png())},
                                                            {"content_base64": b64(b.png()), "filename": "r.png"}]})
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["Location"] == f"/v1/ocr/jobs/{job['id']}"
    assert job["state"] in ("queued", "running") and job["pages_total"] == 2 and job["result"] is None
    job = await job_finished(http, f"/v1/ocr/jobs/{job['id']}")
    assert job["state"] == "succeeded", job
    pages = job["result"]["pages"]
    assert [p["index"] for p in pages] == [0, 1] and all(p["engine"] == "tesseract" for p in pages)
    assert cer(a.truth, pages[0]["text"]) < 0.1 and cer(b.truth, pages[1]["text"]) < 0.15
    assert all(len(ln["box"]) == 4 for ln in pages[0]["lines"])


async def test_bad_uploads_are_400_with_fields_and_unknown_jobs_404(http):
    r = await http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": b64(SAMPLES["cover-00"].png())},
                                                            {"content_base64": b64(b"plain text, no image")}]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "documents[1]", r.text
    r = await http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": "***"}]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "documents[0].content_base64"
    r = await http.post("/v1/ocr/jobs", json={"documents": []})
    assert r.status_code == 400
    r = await http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": "A" * 2_100_000}]})
    assert r.status_code == 413
    r = await http.get("/v1/ocr/jobs/does-not-exist")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
