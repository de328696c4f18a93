"""`POST /v1/pii:detect` and the OCR service's DetectPii RPC: spans, masking, bad input, and nothing leaked.

The gateway (ASGI) over a real OCR service on port 0, both traced into in-memory exporters and
logging into pytest's capture: after a detection, no log line and no span attribute holds the
input or any value found.
"""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient
from support.apps import asgi_client, gateway_app
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")
TEXT = ("성명: 홍길동\n주민등록번호: 900115-1234567\n휴대폰: 010-1234-5678\n이메일: gildong.hong@example.com\n"
        "주소: 서울특별시 강남구 테헤란로 123\n회사 대표번호 1588-1234, 사업자등록번호 123-45-67890")
SECRETS = ("홍길동", "900115", "1234-5678", "gildong.hong", "테헤란로 123")


async def test_detect_and_mask_through_rest_and_grpc_with_nothing_in_logs_or_spans(redis_url, caplog):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    db = redis_url.rsplit("/", 1)[0] + "/6"
    caplog.set_level(logging.DEBUG)
    async with running_ocr(engines=1, redis_url=db, job_workers=1, tracer_provider=provider) as svc:
        app = gateway_app(1, 1, ocr_target=f"127.0.0.1:{svc.port}", tracer_provider=provider)
        async with asgi_client(app) as http:
            r = await http.post("/v1/pii:detect", json={"text": TEXT, "mask": True, "keep": True})
            assert r.status_code == 200, r.text
            out = r.json()
            bad = [await http.post("/v1/pii:detect", json=body) for body in (
                {"text": ""}, {"text": "가" * 200_001}, {"text": "홍길동", "kinds": ["dna"]},
                {"text": "홍길동", "threshold": 2})]
            surrogate = await http.post("/v1/pii:detect", content='{"text": "성명 \\ud800 홍길동"}',
                                        headers={"content-type": "application/json"})
            after = await http.post("/v1/pii:detect", json={"text": "연락처 010-9876-5432", "kinds": ["phone"]})
        client = AsyncOcrClient(f"127.0.0.1:{svc.port}")
        try:
            direct = await client.detect_pii(TEXT, kinds=["resident_number", "phone"])
            with pytest.raises(MeshClientError) as err:
                await client.detect_pii("   ")
        finally:
            await client.close()
    kinds = {(s["kind"], s["text"]) for s in out["spans"]}
    assert kinds == {("person", "홍길동"), ("resident_number", "900115-1234567"), ("phone", "010-1234-5678"),
                     ("email", "gildong.hong@example.com"), ("address", "서울특별시 강남구 테헤란로 123")}
    assert all(TEXT[s["start"]:s["end"]] == s["text"] for s in out["spans"])
    assert "900115-1******" in out["masked_text"] and "010-****-****" in out["masked_text"]
    assert "1588-1234" in out["masked_text"] and "123-45-67890" in out["masked_text"], "distractors untouched"
    assert [(b.status_code, b.json()["error"]["fields"][0]["field"]) for b in bad] == [
        (400, "text"), (400, "text"), (400, "kinds[0]"), (400, "threshold")]
    assert surrogate.status_code == 400 and after.status_code == 200 and after.json()["spans"][0]["kind"] == "phone"
    assert {s.kind for s in direct.spans} == {"resident_number", "phone"} and direct.masked_text == ""
    assert err.value.code.name == "INVALID_ARGUMENT"
    logged = "\n".join(r.getMessage() + " " + str(r.__dict__) for r in caplog.records)
    attributes = " ".join(str(dict(s.attributes or {})) + s.name for s in exporter.get_finished_spans())
    assert exporter.get_finished_spans(), "the calls were traced"
    for secret in SECRETS:
        assert secret not in logged and secret not in attributes, secret
