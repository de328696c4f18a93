"""Files in, text out (issue 62): ReadFile on a real OCR service and the gateway's files routes.

Real Tesseract, Redis, embedding and retrieval services on port 0; the documents are made here
(bench/file_set.py): digital PDFs from two generators, a scanned PDF, a Word file and an HTML page.
"""

from __future__ import annotations

import asyncio
import base64

import pytest
import pytest_asyncio

from bench.file_set import build_files, long_pdf
from bench.ocr_set import cer
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")
FILES = {f.name: f for f in build_files(23, per_source=1)}
LONG = {(1, 3): long_pdf(1, 3), (2, 4): long_pdf(2, 4), (3, 20): long_pdf(3, 20)}  # made here, not on the loop


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http(redis_url, embedding_service, retrieval_port):
    db = redis_url.rsplit("/", 1)[0] + "/6"
    async with running_ocr(engines=1, redis_url=db, job_workers=1, max_file_ocr_pages=2) as svc:
        app = gateway_app(embedding_service.port, retrieval_port, ocr_target=f"127.0.0.1:{svc.port}")
        async with asgi_client(app) as client:
            yield client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_each_format_is_read_with_the_source_of_each_page(http):
    for name, kind in (("reportlab-0", "pdf"), ("fpdf2-0", "pdf"), ("docx-0", "docx"), ("html-0", "html")):
        sample = FILES[name]
        r = await http.post("/v1/files:read", json={"content_base64": b64(sample.data), "filename": f"{name}.bin"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["kind"] == kind and out["filename"] == f"{name}.bin" and len(out["sha256"]) == 64
        assert [p["source"] for p in out["pages"]] == ["text_layer"] * len(sample.pages)
        assert cer(sample.text, out["text"]) == 0.0, (name, out["text"][:100])
    word = out = (await http.post("/v1/files:read", json={"content_base64": b64(FILES["reportlab-0"].data)})).json()
    first = word["pages"][0]
    assert first["image_width"] == 1654 and first["lines"][1]["words"][1]["box"][2] > 0


async def test_a_scan_is_read_by_ocr_and_a_multipart_upload_works(http):
    sample = FILES["scan-0"]
    r = await http.post("/v1/files:read", files={"file": ("scan.pdf", sample.data, "application/pdf")},
                        data={"languages": "kor+eng"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["filename"] == "scan.pdf" and [p["source"] for p in out["pages"]] == ["ocr", "ocr"]
    assert [p["layer_problem"] for p in out["pages"]] == ["no_text_layer"] * 2
    assert cer(sample.text, out["text"]) < 0.1


async def test_bad_files_are_4xx_naming_the_problem_and_the_service_goes_on(http):
    cases = [({"content_base64": b64(FILES["reportlab-0"].data[:400])}, 400, "unreadable PDF"),
             ({"content_base64": b64(b"PK\x03\x04" + b"\x00" * 64)}, 400, "zip"),
             ({"content_base64": b64(b"\x00\x01binary\x00\x02")}, 400, "not a type"),
             ({"content_base64": "***"}, 400, "base64"),
             ({"content_base64": b64(LONG[1, 3].data), "languages": "klingon"}, 400, "languages")]
    for body, status, why in cases:
        r = await http.post("/v1/files:read", json=body)
        assert r.status_code == status and why in r.text, (why, r.status_code, r.text[:300])
    nested = b"[" * 100_000 + b"]" * 100_000
    r = await http.post("/v1/files:read", content=nested, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "nested too deep" in r.text
    r = await http.post("/v1/files:read", files={"nofile": ("x", b"abc")})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "file"
    # three scanned pages: over this service's two OCR pages (made off the loop: fonts subset for ~1 s)
    scans = (await asyncio.to_thread(build_files, 5, per_source=1, pages=3))[2]
    r = await http.post("/v1/files:read", json={"content_base64": b64(scans.data)})
    assert r.status_code == 400 and "need OCR" in r.text
    r = await http.post("/v1/files:read", json={"content_base64": b64(FILES["docx-0"].data)})
    assert r.status_code == 200  # still serving


async def test_a_file_in_a_collection_is_one_document_whose_passages_name_their_page(http):
    assert (await http.post("/v1/collections", json={"name": "files", "fields": {}})).status_code == 201
    doc = LONG[2, 4]
    body = {"content_base64": b64(doc.data), "filename": "guide.pdf"}
    first = (await http.post("/v1/collections/files/files", json=body)).json()
    done = await job_finished(http, f"/v1/jobs/{first['id']}")
    assert done["state"] == "succeeded", done
    result = done["result"]
    assert result["pages"] == 4 and result["sources"]["text_layer"] == 4 and result["id"].startswith("file-")
    async def store() -> dict:
        job = (await http.post("/v1/collections/files/files", json=body)).json()
        return await job_finished(http, f"/v1/jobs/{job['id']}")

    assert (await store())["result"]["unchanged"] is True
    third_page_line = doc.pages[2].splitlines()[5]
    hits = (await http.post("/v1/search", json={"collection": "files", "query": third_page_line, "top_k": 1})).json()
    hit = hits["hits"][0]
    assert hit["id"] == result["id"] and hit["payload"]["filename"] == "guide.pdf"
    starts = [int(x) for x in hit["payload"]["page_starts"]]
    assert len(starts) == 4 and hit["text"][starts[2]:].startswith(doc.pages[2][:20])
    from gateway.files.serving import page_of
    assert page_of(hit["payload"], hit["passage"]["start"]) in (2, 3)  # the passage holding page 3's line
    r = await http.post("/v1/collections/files/documents:delete", json={"ids": [result["id"]]})
    assert r.status_code == 200, r.text
    search = {"collection": "files", "query": third_page_line, "top_k": 3}
    assert (await http.post("/v1/search", json=search)).json()["hits"] == []
    assert "unchanged" not in (await store())["result"]  # deleted, so stored again


async def test_a_task_input_can_be_a_file(http):
    long_resume = LONG[3, 20]  # 20 pages: more than resume_analysis's 8,000 characters
    r = await http.post("/v1/tasks/resume_analysis", json={
        "input": {"posting": "백엔드 개발자"}, "files": {"resume": {"content_base64": b64(long_resume.data)}}})
    assert r.status_code == 400, r.text
    field = r.json()["error"]["fields"][0]
    assert field["field"] == "input.resume" and field["description"].endswith("at most 8000")  # the file's text
    assert "주말 농장" not in r.text  # the text itself never comes back in the error
    r = await http.post("/v1/tasks/resume_analysis", json={
        "input": {"posting": "백엔드 개발자"}, "files": {"resume": {"content_base64": b64(b"\x00\x01\x02binary")}}})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "files.resume", r.text
