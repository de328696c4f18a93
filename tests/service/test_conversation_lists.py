"""A gift conversation's end: a reply per turn, the confirm screen, and the two lists as a job.

Over real embedding, retrieval and reasoning services; the LLM is the OpenAI-compatible stand-in
(bench/standin.py), scripted per call so the mesh's part is what is checked: the turn sent before its
reply, the missing fields chosen by code, a summary with a made-up amount or a late one set to null,
the profile frozen, the lists' hard filters, one reason call per query with a failed one losing only
its own items' reasons. The real model runs in bench/gift_lists.py.
"""

from __future__ import annotations

import json
import re
import time

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.apps import asgi_client, gateway_app, parse_sse
from support.catalogs import EMPTY_PROPOSAL, GIFT_ATTRIBUTES, GIFT_CATALOG, GIFT_CATEGORIES, stances
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
CATALOG, CATEGORIES, ATTRIBUTES, EMPTY = GIFT_CATALOG, GIFT_CATEGORIES, GIFT_ATTRIBUTES, EMPTY_PROPOSAL
PROPOSALS = {
    "아내 생일 선물 찾는데요": {"recipient": "아내", "occasion": "생일"},
    "남편 생일 선물이요": {"recipient": "남편", "occasion": "생일"},
    "친구 집들이 선물이요": {"recipient": "친구", "occasion": "집들이"},
    "예산은 10만 원 정도예요": {},
    "향수는 빼 주세요": stances(향수="refuse"),
    "향초나 꽃이 좋겠어요": stances(향초="want", 꽃="want"),
}
CALLS: list[str] = []


def reply(body: dict) -> dict:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "이번 말: " in user:  # the turn's extraction (spec_delta)
        turn = user.rsplit("이번 말: ", 1)[1].strip()
        return {"chunks": [json.dumps({**EMPTY, **PROPOSALS.get(turn, {})}, ensure_ascii=False)]}
    if "요약문" in system:
        CALLS.append("summary")
        if "받는 사람: 남편" in user:  # a made-up budget: code must refuse it
            return {"chunks": [json.dumps({"summary": "남편 생일 선물로 20만 원짜리를 찾아요."}, ensure_ascii=False)]}
        if "받는 사람: 친구" in user:  # late
            return {"chunks": ['{"summary": "늦은 요약"}'], "first_delay_s": 3.0}
        return {"chunks": [json.dumps({"summary": "아내 생일 선물로 10만 원 이하에서 찾아요. 향수는 빼고요."},
                                      ensure_ascii=False)]}
    if "점원" in system:
        CALLS.append("reply")
        return {"chunks": ["예산은 ", "얼마 정도 생각하세요?"]}
    if "검색 질의를 다시 쓰는" in system:
        CALLS.append("derived")
        want = body["response_format"]["json_schema"]["schema"]["properties"]["queries"]["minItems"]
        return {"chunks": [json.dumps({"queries": ["아내에게 줄 생일 선물", "아내 생일 기념 선물"][:want]},
                                      ensure_ascii=False)]}
    if "추천 이유" in system:
        query = re.search(r"검색어: (.*)", user).group(1)
        CALLS.append(f"reason:{query}")
        if "꽃" in query:  # this query's call fails; the others must keep theirs
            return {"status": 500}
        # a reason that describes the items it stands under (issue 81: one that does not is not kept)
        named = "·".join(dict.fromkeys(re.findall(r"[가-힣]{2,}", t)[0] for t in re.findall(r"(?m)^- (.+)$", user)))
        return {"chunks": [json.dumps({"reason": f"{named} 모두 생일 선물로 좋아요"[:50]}, ensure_ascii=False)]}
    return {"chunks": ["{}"]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gifts(embedding_service, retrieval_port):
    """The gateway over the services and the stand-in, the gift catalog ingested."""
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}",
                              conversation_summary_timeout_s=1.0)
            async with asgi_client(app) as http:
                r = await http.post("/v1/collections", json={"name": "gifts", "fields": CATALOG["fields"]})
                assert r.status_code == 201, r.text
                job = (await http.post("/v1/collections/gifts/documents",
                                       json={"documents": CATALOG["items"]})).json()
                assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
                yield http
    finally:
        standin.close()


async def _conversation(http, *turns: str) -> str:
    r = await http.post("/v1/conversations", json={"collection": "gifts", "categories": CATEGORIES,
                                                   "attributes": ATTRIBUTES})
    cid = r.json()["id"]
    for text in turns:
        assert (await http.post(f"/v1/conversations/{cid}/turns", json={"text": text})).status_code == 200
    return cid


async def test_the_turn_comes_first_then_a_reply_asking_what_code_found_missing(gifts):
    cid = await _conversation(gifts)
    r = await gifts.post(f"/v1/conversations/{cid}/turns:stream", json={"text": "아내 생일 선물 찾는데요"})
    got = parse_sse(r)
    assert [e for e, _ in got] == ["turn", "delta", "delta", "reply"]
    assert got[0][1]["profile"]["recipient"] == "아내"
    assert got[-1][1]["text"] == "예산은 얼마 정도 생각하세요?" and got[-1][1]["asked"] == ["budget"]
    assert got[-1][1]["error"] is None


async def test_confirm_freezes_the_profile_with_keywords_and_a_checked_summary(gifts):
    cid = await _conversation(gifts, "아내 생일 선물 찾는데요", "예산은 10만 원 정도예요", "향수는 빼 주세요")
    before = await gifts.post(f"/v1/conversations/{cid}/lists", json={})
    assert before.status_code == 409 and before.json()["error"]["code"] == "not_confirmed"
    r = await gifts.post(f"/v1/conversations/{cid}:confirm")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["summary_error"] is None, body["summary_error"]
    assert body["summary"] == "아내 생일 선물로 10만 원 이하에서 찾아요. 향수는 빼고요." and not body["already"]
    assert body["keywords"] == ["아내", "생일", "10만 원 이하", "향수 제외"] and body["turn"] == 3
    again = (await gifts.post(f"/v1/conversations/{cid}:confirm")).json()
    assert again["already"] and again["summary"] == body["summary"] and CALLS.count("summary") == 1
    late = await gifts.post(f"/v1/conversations/{cid}/turns", json={"text": "향초나 꽃이 좋겠어요"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "conversation_confirmed"


async def test_a_summary_with_a_made_up_amount_or_a_late_one_is_null(gifts):
    made_up = await _conversation(gifts, "남편 생일 선물이요")
    body = (await gifts.post(f"/v1/conversations/{made_up}:confirm")).json()
    assert body["summary"] is None and body["summary_error"].startswith("unfaithful")
    assert "20만" in body["summary_error"] and body["keywords"] == ["남편", "생일"]
    slow = await _conversation(gifts, "친구 집들이 선물이요")
    t = time.perf_counter()
    body = (await gifts.post(f"/v1/conversations/{slow}:confirm")).json()
    assert body["summary"] is None and body["summary_error"] == "deadline_exceeded"
    assert time.perf_counter() - t < 2.5  # never late: the 1 s deadline, no retry


async def test_lists_keep_the_hard_filters_and_a_failed_reason_loses_only_its_query(gifts):
    cid = await _conversation(gifts, "아내 생일 선물 찾는데요", "예산은 10만 원 정도예요", "향수는 빼 주세요",
                              "향초나 꽃이 좋겠어요")
    assert (await gifts.post(f"/v1/conversations/{cid}:confirm")).status_code == 200
    r = await gifts.post(f"/v1/conversations/{cid}/lists", json={"top_k": 4, "derived": 1})
    assert r.status_code == 202, r.text
    job = r.json()
    assert (await gifts.get(f"/v1/jobs/{job['id']}")).status_code == 404  # not a collection's job
    done = await job_finished(gifts, f"/v1/conversations/{cid}/lists/{job['id']}")
    assert done["state"] == "succeeded", done
    result = done["result"]
    items = {i["id"]: i for i in CATALOG["items"]}
    gift, mine = result["gift"], result["self"]
    assert gift and mine and not {i["id"] for i in gift} & {i["id"] for i in mine}
    for item in gift + mine:
        payload = items[item["id"]]["payload"]
        assert payload["price"] <= 100_000 and payload["category"] != "향수"
    queries = result["queries"]["gift"]
    assert [q["query"] for q in queries][:2] == ["아내 생일 향초 선물", "아내 생일 꽃 선물"]
    assert result["expansion"]["status"] == "skipped"  # categories named: code's queries alone
    by_query = {q["query"]: q for q in queries}
    assert by_query["아내 생일 꽃 선물"]["reason_status"] == "failed"
    assert by_query["아내 생일 향초 선물"]["reason_status"] == "ok", by_query
    for item in gift:  # a failed query's items get code's reason each, from the profile and the item
        price = items[item["id"]]["payload"]["price"]
        if item["query"] == "아내 생일 꽃 선물":
            assert item["reason_source"] == "rule" and item["reason"].startswith("아내 생일 선물 · 원하신 꽃 · "), item
            assert f"{price:,}원" in item["reason"] and "향수" not in item["reason"], item
        else:
            assert item["reason_source"] == "model" and item["reason"] == by_query[item["query"]]["reason"]
    assert all(item["reason"] and item["reason_source"] in ("model", "rule") for item in mine)
    assert set(result["timings"]) == {"queries_ms", "embed_ms", "search_ms", "reasons_ms", "total_ms"}
    calls = [c for c in CALLS if c.startswith("reason:")]
    assert len(calls) == len(set(calls))  # one call per query


async def test_an_open_request_gets_derived_queries(gifts):
    cid = await _conversation(gifts, "아내 생일 선물 찾는데요", "예산은 10만 원 정도예요")
    assert (await gifts.post(f"/v1/conversations/{cid}:confirm")).status_code == 200
    job = (await gifts.post(f"/v1/conversations/{cid}/lists", json={"top_k": 3, "reasons": False})).json()
    done = await job_finished(gifts, f"/v1/conversations/{cid}/lists/{job['id']}")
    result = done["result"]
    assert result["expansion"] == {"status": "ok", "reason": None, "derived": 2}
    assert [q["query"] for q in result["queries"]["gift"]] == ["아내 생일 선물", "아내에게 줄 생일 선물",
                                                              "아내 생일 기념 선물"]
