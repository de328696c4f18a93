"""A turn and a confirm are exclusive, across two gateway instances on one Redis (issue 77, item 1).

Before: a turn checked "not confirmed" when it loaded and wrote itself without checking again, and a
confirm froze the last turn it had read before spending up to 5 s on its summary. "와인은 빼 주세요"
sent to one instance while the other confirmed got a 200 with 와인 excluded, and the confirmation (and
the list job after it) kept the older profile: a forbidden item could be recommended. Now each write is
one atomic script: a confirm starts again from a turn that came in while it wrote its summary, and a
turn after the freeze is a 409.

Over real embedding, retrieval and reasoning services and a real Redis; the LLM is the stand-in, its
summary answer slowed so that the turn lands inside the confirm.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.catalogs import EMPTY_PROPOSAL, GIFT_ATTRIBUTES, GIFT_CATALOG, GIFT_CATEGORIES, stances
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROPOSALS = {"아내 생일 선물 찾는데요": {"recipient": "아내", "occasion": "생일"},
             "와인은 빼 주세요": stances(와인="refuse")}


def reply(body: dict) -> dict:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "이번 말: " in user:
        turn = user.rsplit("이번 말: ", 1)[1].strip()
        return {"chunks": [json.dumps({**EMPTY_PROPOSAL, **PROPOSALS.get(turn, {})}, ensure_ascii=False)]}
    if "요약문" in system:  # slow: the other instance's turn lands while it is written
        return {"chunks": [json.dumps({"summary": "아내 생일 선물을 찾아요."}, ensure_ascii=False)],
                "first_delay_s": 1.5}
    return {"chunks": ["{}"]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def two(embedding_service, retrieval_port, redis_url):
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            options = {"reasoning_targets": f"127.0.0.1:{svc.port}", "sessions_redis_url": redis_url,
                       "conversation_summary_timeout_s": 4.0}
            one = gateway_app(embedding_service.port, retrieval_port, **options)
            other = gateway_app(embedding_service.port, retrieval_port, **options)
            async with asgi_client(one) as h1, asgi_client(other) as h2:
                r = await h1.post("/v1/collections", json={"name": "race-gifts", "fields": GIFT_CATALOG["fields"]})
                assert r.status_code == 201, r.text
                yield h1, h2
    finally:
        standin.close()


async def test_a_turn_sent_during_a_confirm_is_in_the_frozen_profile_and_one_after_it_is_refused(two):
    h1, h2 = two
    cid = (await h1.post("/v1/conversations", json={"collection": "race-gifts", "categories": GIFT_CATEGORIES,
                                                    "attributes": GIFT_ATTRIBUTES})).json()["id"]
    first = await h1.post(f"/v1/conversations/{cid}/turns", json={"text": "아내 생일 선물 찾는데요"})
    assert first.status_code == 200, first.text

    async def late_turn():
        await asyncio.sleep(0.5)  # the confirm has read turn 1 and waits for its summary
        return await h2.post(f"/v1/conversations/{cid}/turns", json={"text": "와인은 빼 주세요"})

    confirmed, turn = await asyncio.gather(h1.post(f"/v1/conversations/{cid}:confirm", json={}), late_turn())
    assert confirmed.status_code == 200, confirmed.text
    body = confirmed.json()
    if turn.status_code == 200:  # the turn was accepted: the frozen profile must hold what it said
        assert body["turn"] == turn.json()["turn"] == 2, body
        assert "와인" in body["profile"]["excluded_categories"], body
    else:  # or it was refused for a confirm that came first: then nothing it said was promised
        assert turn.status_code == 409 and turn.json()["error"]["code"] == "conversation_confirmed", turn.text
    after = await h2.post(f"/v1/conversations/{cid}/turns", json={"text": "와인은 빼 주세요"})
    assert after.status_code == 409 and after.json()["error"]["code"] == "conversation_confirmed", after.text
    state = (await h2.get(f"/v1/conversations/{cid}")).json()
    assert len(state["turns"]) == body["turn"]  # no turn stored beyond the frozen one


async def test_a_confirmed_conversation_reopened_on_two_instances_takes_three_corrections_then_a_new_confirm(two):
    h1, h2 = two
    cid = (await h1.post("/v1/conversations", json={"collection": "race-gifts", "categories": GIFT_CATEGORIES,
                                                    "attributes": GIFT_ATTRIBUTES})).json()["id"]
    said = await h1.post(f"/v1/conversations/{cid}/turns", json={"text": "아내 생일 선물 찾는데요"})
    assert said.status_code == 200
    never = await h2.post(f"/v1/conversations/{cid}:reopen")
    assert never.status_code == 409 and never.json()["error"]["code"] == "not_confirmed"
    first = (await h1.post(f"/v1/conversations/{cid}:confirm", json={})).json()
    assert first["turn"] == 1 and first["profile"]["excluded_categories"] == []

    both = await asyncio.gather(h1.post(f"/v1/conversations/{cid}:reopen"), h2.post(f"/v1/conversations/{cid}:reopen"))
    assert [r.status_code for r in both] == [200, 200], [r.text for r in both]
    assert sorted(r.json()["already"] for r in both) == [False, True]  # one reopened, the other saw it open
    assert all(r.json()["corrections_left"] == 3 and r.json()["confirmed_turn"] == 1 for r in both)
    refused = await h1.post(f"/v1/conversations/{cid}/lists", json={"top_k": 3})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_confirmed"

    fix = await h2.post(f"/v1/conversations/{cid}/turns", json={"text": "와인은 빼 주세요"})
    assert fix.status_code == 200 and fix.json()["turn"] == 2, fix.text
    assert fix.json()["profile"]["recipient"] == "아내"  # merged onto the confirmed profile
    for text in ("아내 생일 선물 찾는데요", "아내 생일 선물 찾는데요"):
        assert (await h1.post(f"/v1/conversations/{cid}/turns", json={"text": text})).status_code == 200
    fourth = await h2.post(f"/v1/conversations/{cid}/turns", json={"text": "아내 생일 선물 찾는데요"})
    assert fourth.status_code == 409 and fourth.json()["error"]["code"] == "corrections_used", fourth.text

    again = (await h2.post(f"/v1/conversations/{cid}:confirm", json={})).json()
    assert again["turn"] == 4 and not again["already"] and again["profile"]["excluded_categories"] == ["와인"]
    lists = await h1.post(f"/v1/conversations/{cid}/lists", json={"top_k": 3})
    assert lists.status_code == 202, lists.text  # the lists now read the new confirmation
    stored = (await h1.post(f"/v1/conversations/{cid}:confirm", json={})).json()
    assert stored["already"] and stored["turn"] == 4
