"""The semantic answer cache through `/v1/answers` over the real embedding, retrieval and reasoning services.

The LLM is the scripted stand-in (bench/standin.py), so a call to it is counted exactly: a cached
answer is one the model was not asked for. The cache's decisions on Korean paraphrases and near-misses
are measured in bench/semantic_cache.py; here: served, marked and unbilled; refused on another
number; off per request; forgotten when the collection changes, on one instance and across two
sharing Redis.
"""

from __future__ import annotations

import uuid

import pytest

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.answering import answer_json, answering
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = [
    {"id": "leave", "text": "연차 휴가는 입사 1년 후 15일이 주어집니다. 쓰지 못한 연차는 다음 해로 최대 5일까지 "
                            "이월할 수 있습니다. 이월한 연차는 3월 말까지 써야 합니다.",
     "payload": {"title": "휴가 규정"}},
    {"id": "trip", "text": "출장비는 출장 후 7일 안에 영수증과 함께 청구합니다. 숙박비는 1박에 12만 원까지 지원합니다.",
     "payload": {"title": "경비 규정"}},
]
QUESTION = "쓰지 못한 연차는 다음 해로 최대 며칠까지 이월할 수 있나요?"
ANSWER = answer_json(True, "쓰지 못한 연차는 다음 해로 최대 5일까지 이월할 수 있습니다.", [2])


@pytest.fixture(scope="module")
def ports(embedding_service, retrieval_port):
    """(embedding, retrieval) ports."""
    return embedding_service.port, retrieval_port


async def collection(http, docs=DOCS) -> str:
    """A new collection holding ``docs``, created through this gateway; its name."""
    name = f"cache-{uuid.uuid4().hex[:8]}"
    assert (await http.post("/v1/collections", json={"name": name, "fields": {}})).status_code == 201
    await ingest(http, name, docs)
    return name


async def ingest(http, name: str, docs: list[dict]) -> None:
    job = (await http.post(f"/v1/collections/{name}/documents", json={"documents": docs})).json()
    assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"


async def ask(http, name: str, question: str = QUESTION, **more) -> dict:
    r = await http.post("/v1/answers", json={"collection": name, "question": question, **more})
    assert r.status_code == 200, r.text
    return r.json()


async def test_the_same_question_is_served_the_checked_answer_without_the_model(ports):
    async with answering(ports, [ANSWER]) as (http, standin):
        name = await collection(http)
        first = await ask(http, name)
        assert first["answerable"] and first["cached"] is None and first["usage"] is not None
        again = await ask(http, name)
        assert len(standin.requests) == 1, "the model was asked again"
        assert again["cached"] == "semantic" and again["usage"] is None
        assert again["cache"] == {"question": QUESTION, "similarity": pytest.approx(1.0, abs=1e-3)}
        assert again["answer"] == first["answer"] and again["citations"] == first["citations"]
        assert again["timings"]["cache_ms"] is not None and again["timings"]["search_ms"] == 0.0
        # The stream route serves it too: passages, the answer, done.
        r = await http.post("/v1/answers:stream", json={"collection": name, "question": QUESTION})
        events = parse_sse(r)
        assert [e for e, _ in events] == ["passages", "delta", "done"] and events[2][1]["cached"] == "semantic"
        assert len(standin.requests) == 1


async def test_another_number_or_cache_false_asks_the_model(ports):
    async with answering(ports, [ANSWER]) as (http, standin):
        name = await collection(http)
        await ask(http, name)
        other = await ask(http, name, "쓰지 못한 연차는 다음 해로 3일까지 이월할 수 있나요?")
        assert other["cached"] is None and len(standin.requests) == 2
        off = await ask(http, name, cache=False)
        assert off["cached"] is None and len(standin.requests) == 3


async def test_a_write_to_the_collection_forgets_its_cached_answers(ports):
    async with answering(ports, [ANSWER]) as (http, standin):
        name = await collection(http)
        await ask(http, name)
        await ingest(http, name, [{"id": "new", "text": "2027년부터 연차는 다음 해로 최대 10일까지 이월됩니다."}])
        after = await ask(http, name)
        assert after["cached"] is None and len(standin.requests) == 2
        assert (await ask(http, name))["cached"] == "semantic"
        r = await http.post(f"/v1/collections/{name}/documents:delete", json={"ids": ["new"]})
        assert r.status_code == 200, r.text
        assert (await ask(http, name))["cached"] is None and len(standin.requests) == 3


async def test_two_instances_on_one_redis_share_the_cache_and_its_invalidation(ports, redis_url):
    standin = ChatStandIn([ANSWER])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            def instance():
                return gateway_app(ports[0], ports[1], reasoning_targets=f"127.0.0.1:{svc.port}",
                                   answer_min_relevance=0.0, redis_url=redis_url)
            async with asgi_client(instance()) as one, asgi_client(instance()) as two:
                name = await collection(one)
                await ask(one, name)
                assert (await ask(two, name))["cached"] == "semantic" and len(standin.requests) == 1
                await ingest(two, name, [{"id": "new", "text": "숙박비 지원 한도는 2027년부터 15만 원입니다."}])
                assert (await ask(one, name))["cached"] is None and len(standin.requests) == 2
    finally:
        standin.close()
