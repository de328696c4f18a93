"""`/v1/answers` with the real model: the embedded Qwen2.5-Coder-1.5B on llama-server, the real mesh on port 0.

One answerable question over three short policy documents: the answer must be grounded (its one
citation or more names the policy that holds the fact, and the fact is in the answer); the model's
wording is not asserted. Quality over many questions is bench/answers.py's job, not a test's.
"""

from __future__ import annotations

import pytest
import pytest_asyncio

from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
SLOW = {"reasoning_first_token_s": 240.0, "reasoning_generation_s": 240.0, "reasoning_total_s": 300.0,
        "reasoning_timeout_ms": 400000}
DOCS = [
    {"id": "leave", "text": "연차 휴가는 입사 1년 후 15일이 주어집니다. 쓰지 못한 연차는 다음 해로 최대 5일까지 "
                            "이월할 수 있습니다.", "payload": {"title": "휴가 규정"}},
    {"id": "trip", "text": "출장비는 출장 후 7일 안에 영수증과 함께 청구합니다. 숙박비는 1박에 12만 원까지 지원합니다.",
     "payload": {"title": "경비 규정"}},
    {"id": "ship", "text": "반품은 책을 받은 날부터 14일 안에 신청할 수 있습니다.", "payload": {"title": "배송 안내"}},
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http(embedding_service, retrieval_port, llm_server):
    async with running_reasoning(backend_url=llm_server.base_url) as reasoning:
        app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}",
                          **SLOW)
        async with asgi_client(app, timeout=400) as client:
            r = await client.post("/v1/collections", json={"name": "rag", "fields": {}})
            assert r.status_code == 201, r.text
            job = (await client.post("/v1/collections/rag/documents", json={"documents": DOCS})).json()
            assert (await job_finished(client, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
            yield client


async def test_the_real_model_answers_from_the_passage_that_holds_the_fact(http):
    question = "쓰지 못한 연차는 며칠까지 넘길 수 있나요?"
    r = await http.post("/v1/answers", json={"collection": "rag", "question": question, "top_k": 3})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["answerable"] and out["reason"] == "answered", out
    assert "5" in out["answer"]
    assert "leave" in [c["id"] for c in out["citations"]], out["citations"]
    assert out["usage"]["llm_calls"] >= 1 and out["passages"][0]["id"] == "leave"
