"""Conversations turned into searches: `/v1/conversations` over real embedding, retrieval and reasoning services.

The extraction's LLM is the OpenAI-compatible stand-in (bench/standin.py), answering each turn with a
scripted proposal — some of them wrong on purpose (a budget misread, an exclusion missed), as a small
model's are — so what is checked is the mesh's part: the budget read by code, exclusions code reads
itself, the profile kept across turns, the filters the search runs with and their effect on the hits.
The real model runs in bench/conversations.py.
"""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.catalogs import EMPTY_PROPOSAL, GIFT_ATTRIBUTES, GIFT_CATALOG, GIFT_CATEGORIES, stances
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
CATALOG, CATEGORIES, ATTRIBUTES, EMPTY = GIFT_CATALOG, GIFT_CATEGORIES, GIFT_ATTRIBUTES, EMPTY_PROPOSAL
PROPOSALS = {  # what the stand-in "model" proposes for each turn
    "아내 생일 선물 찾는데요": {"recipient": "아내", "occasion": "생일"},
    "예산은 10만 원 정도예요": {"keywords": ["10000원"]},  # misread: code reads the budget from the turn
    "향수는 빼 주세요": stances(향수="refuse"),
    "아, 꽃도 싫어해요": {},  # missed: code reads the refusal
    "각인 되는 지갑이나 시계로 보여 주세요": stances(지갑="want", 시계="want", 각인="want"),
    "향수 좋긴 한데 향수는 빼 주세요": stances(향수="want"),
}


def reply(body: dict) -> dict:
    turn = body["messages"][-1]["content"].rsplit("이번 말: ", 1)[1].strip()
    return {"chunks": [json.dumps({**EMPTY, **PROPOSALS.get(turn, {})}, ensure_ascii=False)]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gifts(embedding_service, retrieval_port):
    """The gateway over embedding, retrieval and a reasoning service on the stand-in; the gift catalog ingested."""
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}")
            async with asgi_client(app) as http:
                r = await http.post("/v1/collections", json={"name": "gifts", "fields": CATALOG["fields"]})
                assert r.status_code == 201, r.text
                job = (await http.post("/v1/collections/gifts/documents",
                                       json={"documents": CATALOG["items"]})).json()
                done = await job_finished(http, f"/v1/jobs/{job['id']}")
                assert done["state"] == "succeeded", json.dumps(done, ensure_ascii=False)[:1500]
                yield http
    finally:
        standin.close()


async def _start(http) -> str:
    r = await http.post("/v1/conversations", json={"collection": "gifts", "categories": CATEGORIES,
                                                   "attributes": ATTRIBUTES})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_four_turns_end_in_a_search_that_honours_every_constraint(gifts):
    cid = await _start(gifts)
    for text in ("아내 생일 선물 찾는데요", "예산은 10만 원 정도예요", "향수는 빼 주세요"):
        r = await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": text, "top_k": 20})
        assert r.status_code == 200, r.text
    last = (await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": "아, 꽃도 싫어해요", "top_k": 20})).json()
    profile = last["profile"]
    assert (profile["recipient"], profile["occasion"], profile["budget_max"]) == ("아내", "생일", 100_000)
    assert profile["excluded_categories"] == ["향수", "꽃"] and last["turn"] == 4
    assert last["search"]["filter"] == {"must": [{"field": "price", "lte": 100_000}],
                                        "must_not": [{"field": "category", "any_of": ["향수", "꽃"]}]}
    assert last["search"]["query"] == "아내 생일 선물" and len(last["hits"]) == 20
    for hit in last["hits"]:
        assert hit["payload"]["category"] not in ("향수", "꽃") and hit["payload"]["price"] <= 100_000
    assert last["usage"]["llm_calls"] == 1 and last["timings"]["extraction_ms"] > 0
    state = (await gifts.get(f"/v1/conversations/{cid}")).json()
    assert [t["text"] for t in state["turns"]][-1] == "아, 꽃도 싫어해요" and state["profile"] == profile


async def test_must_have_attributes_filter_a_list_field(gifts):
    cid = await _start(gifts)
    out = (await gifts.post(f"/v1/conversations/{cid}/turns",
                            json={"text": "각인 되는 지갑이나 시계로 보여 주세요"})).json()
    assert out["profile"]["must_have"] == ["각인"] and out["search"]["queries"]
    assert out["hits"] and all("각인" in h["payload"]["tags"] for h in out["hits"])


async def test_bad_turns_and_a_turn_that_contradicts_itself(gifts):
    for cid in ("0" * 32, "nope"):
        missing = await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": "안녕하세요"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "conversation_not_found"
    unknown = await gifts.post("/v1/conversations", json={"collection": "no-such-catalog", "categories": ["꽃"]})
    assert unknown.status_code == 404, unknown.text
    cid = await _start(gifts)
    for bad in ("", "  ", "가" * 1001):
        r = await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": bad})
        assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "text"
    both = (await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": "향수 좋긴 한데 향수는 빼 주세요"})).json()
    assert both["profile"]["excluded_categories"] == ["향수"] and both["profile"]["categories"] == []
    assert any("both wanted and excluded" in n for n in both["notes"])
    assert (await gifts.get(f"/v1/conversations/{cid}")).json()["turns"][0]["notes"] == both["notes"]


async def test_a_conversation_keeps_its_latest_turns_and_counts_the_rest(embedding_service, retrieval_port, gifts):
    # Before: every turn was kept with its profile, and each turn read the whole hash (no bound).
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}",
                              conversation_max_turns=2)
            async with asgi_client(app) as http:
                cid = await _start(http)
                for text in ("아내 생일 선물 찾는데요", "예산은 10만 원 정도예요", "향수는 빼 주세요"):
                    r = await http.post(f"/v1/conversations/{cid}/turns", json={"text": text, "top_k": 5})
                    assert r.status_code == 200, r.text
                state = (await http.get(f"/v1/conversations/{cid}")).json()
                assert [t["text"] for t in state["turns"]] == ["예산은 10만 원 정도예요", "향수는 빼 주세요"]
                assert state["earlier_turns"] == 1
                # The dropped turn's effect stays in the profile.
                assert (state["profile"]["recipient"], state["profile"]["budget_max"]) == ("아내", 100_000)
    finally:
        standin.close()
