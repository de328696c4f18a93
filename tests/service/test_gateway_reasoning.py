"""Gateway LLM routes: recommendations (JSON, SSE), chat (SSE), summaries, session routing.

Real embedding, retrieval and reasoning services on port 0 with the real llama.cpp server; scripted
stand-in backends where routing or failure must be observed cheaply. The fixture ``retrieval_port``
is in tests/service/conftest.py."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning
from support.standins import per_card

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = [
    {"id": "r1", "text": "비 오는 날 읽기 좋은 잔잔한 장편소설", "payload": {"category": "소설"}},
    {"id": "r2", "text": "장마철 우산과 방수 장화 세트", "payload": {"category": "잡화"}},
    {"id": "r3", "text": "백엔드 개발자 면접 질문 모음", "payload": {"category": "IT"}},
]
SLOW = {"reasoning_first_token_s": 120.0, "reasoning_generation_s": 120.0, "reasoning_total_s": 240.0,
        "reasoning_timeout_ms": 300000, "summary_timeout_s": 120.0}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def catalog(embedding_service, retrieval_port):
    """Collection "rec" holding DOCS; (the embedding port, the retrieval port)."""
    app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets="127.0.0.1:1")
    async with asgi_client(app) as http:
        assert (await http.post("/v1/collections", json={"name": "rec", "fields": {"category": "keyword"}}
                                )).status_code == 201
        job = (await http.post("/v1/collections/rec/documents", json={"documents": DOCS})).json()
        assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
    return embedding_service.port, retrieval_port


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def real_gw(catalog, llm_server):
    async with running_reasoning(backend_url=llm_server.base_url) as reasoning:
        app = gateway_app(*catalog, reasoning_targets=f"127.0.0.1:{reasoning.port}", **SLOW)
        async with asgi_client(app, timeout=300) as http:
            yield http


async def test_recommendations_have_a_reason_per_card_from_one_call_each(real_gw):
    r = await real_gw.post("/v1/recommendations", json={"collection": "rec", "query": "비 오는 날 선물", "top_k": 2})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reasons_status"] == "ok" and len(out["cards"]) == 2, out
    for card in out["cards"]:  # text that passed the checks, or code's factual reason (failed checks)
        assert card["reason_status"] in ("ok", "regenerated", "failed")
        assert card["reason_short"] and card["reason_long"]
        assert (card["reason_source"] == "rule") == (card["reason_status"] == "failed")
        assert bool(card["reason_violations"]) == (card["reason_status"] != "ok")
    assert 2 <= out["usage"]["llm_calls"] <= 4  # one call a card, plus one regeneration of each that failed the checks


async def test_recommendations_stream_cards_first_then_a_reason_per_card_then_reasons_then_done(real_gw):
    r = await real_gw.post("/v1/recommendations:stream", json={"collection": "rec", "query": "장마 준비", "top_k": 2})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r)
    assert [e for e, _ in events] == ["cards", "reason", "reason", "reasons", "done"]
    ids = [c["id"] for c in events[0][1]["cards"]]
    assert all(c["reason_status"] is None for c in events[0][1]["cards"])  # no reasons yet
    assert sorted(data["id"] for _, data in events[1:3]) == sorted(ids)
    assert [x["id"] for x in events[3][1]["reasons"]] == ids  # every reason again, in the cards' order
    assert sorted(events[3][1]["reasons"], key=lambda x: x["id"]) == sorted([d for _, d in events[1:3]],
                                                                            key=lambda x: x["id"])
    assert all(x["status"] in ("ok", "regenerated", "failed") for x in events[3][1]["reasons"])
    assert events[-1][1]["reasons_status"] == "ok" and events[-1][1]["usage"]["llm_calls"] >= 1


async def test_chat_sse_ends_with_done_and_16_concurrent_streams_all_terminate(real_gw):
    body = {"session_id": "s-1", "message": "안녕하세요", "system": "당신은 친절한 도우미입니다.", "max_tokens": 4}
    r = await real_gw.post("/v1/chat", json=body)
    events = parse_sse(r)
    assert events[-1][0] == "done" and {e for e, _ in events[:-1]} == {"delta"}
    # Every delta holds at least one token; llama-server sends a multi-token character as one delta.
    assert 1 <= len(events) - 1 <= events[-1][1]["usage"]["completion_tokens"] <= 4
    assert r.headers["X-Mesh-Reasoning-Instance"]

    async def one(i: int) -> list[tuple[str, dict]]:
        resp = await real_gw.post("/v1/chat", json={**body, "session_id": f"c-{i}", "message": f"{i} 더하기 1은?"})
        assert resp.status_code == 200
        return parse_sse(resp)

    results = await asyncio.gather(*[one(i) for i in range(16)])
    for events in results:  # every stream complete: text, then done with matching accounting
        kinds = [e for e, _ in events]
        assert kinds[-1] == "done" and set(kinds[:-1]) == {"delta"}, kinds
        assert 1 <= len(kinds) - 1 <= events[-1][1]["usage"]["completion_tokens"] <= 4


async def test_summary(real_gw):
    text = ("서울 도서관은 매주 월요일에 쉬고 오전 아홉 시에 문을 연다. 대출 기간은 이 주일이며 한 번 연장할 수 있다. "
            "신간은 매달 첫째 주에 들어온다.")
    # The summary deadline is raised for this slow CPU (the 5 s default times out here; its failure
    # path is tested against a stalled stand-in in test_reasoning.py).
    r = await real_gw.post("/v1/summaries", json={"text": text, "max_sentences": 1},
                           headers={"X-Request-Timeout-Ms": "150000"})
    out = r.json()
    assert r.status_code == 200 and not out["failed"] and out["summary"].strip(), out
    assert out["usage"]["llm_calls"] == 1 and out["usage"]["completion_tokens"] > 0


async def test_bad_llm_requests_are_400(real_gw):
    for path, body in [("/v1/chat", {"session_id": "x", "message": ""}),
                       ("/v1/chat", {"session_id": "x", "message": "hi", "max_tokens": 0}),
                       ("/v1/chat", {"message": "no session"}),
                       ("/v1/recommendations", {"collection": "rec", "query": ""}),
                       ("/v1/summaries", {"text": ""})]:
        r = await real_gw.post(path, json=body)
        assert r.status_code == 400, (path, body, r.text)
        assert r.json()["error"]["fields"]
    r = await real_gw.post("/v1/chat", json={"session_id": "x", "message": "이어서",
                                             "history": [{"role": "user", "content": "가" * 3100}]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "history"


async def test_sessions_stick_to_one_instance_and_reasons_degrade(catalog):
    standins = [ChatStandIn([{"chunks": ["네"]}]) for _ in range(3)]
    try:
        async with AsyncExitStack() as stack:
            services = [await stack.enter_async_context(running_reasoning(
                [OpenAIBackend("s", s.url, "standin")], cold=True, instance_name=f"inst-{i}"))
                for i, s in enumerate(standins)]
            targets = ",".join(f"127.0.0.1:{svc.port}" for svc in services)
            async with asgi_client(gateway_app(*catalog, reasoning_targets=targets)) as http:
                seen: dict[str, set[str]] = {}
                for turn in range(4):
                    for session in ("alpha", "beta", "gamma", "delta", "omega", "sigma"):
                        r = await http.post("/v1/chat", json={"session_id": session, "message": f"{turn}번째"})
                        assert parse_sse(r)[-1][0] == "done"
                        seen.setdefault(session, set()).add(r.headers["X-Mesh-Reasoning-Instance"])
                assert all(len(v) == 1 for v in seen.values()), seen
                assert len(set().union(*seen.values())) >= 2  # sessions spread over instances
                # The stand-ins answer "네", which is not a card's JSON: every card, after its one
                # regeneration, comes back with code's factual reason instead of none.
                r = await http.post("/v1/recommendations", json={"collection": "rec", "query": "비 오는 날"})
                assert r.status_code == 200 and r.json()["reasons_status"] == "ok"
                cards = r.json()["cards"]
                assert cards and all(c["reason_source"] == "rule" and c["reason_short"] for c in cards)
                assert all(c["reason_violations"] == ["missing"] for c in cards)
                assert r.json()["usage"]["llm_calls"] == 2 * len(cards)
    finally:
        for s in standins:
            s.close()


async def test_each_card_says_whether_its_reason_passed_the_checks(catalog):
    """r2's reason copies its item twice (the answer and its regeneration): that card alone is failed."""
    # Reasons of substance (issue 81): each names what sets its item apart and ties it to the rainy day.
    good = {"r1": ("비 오는 날 창가에서 넘기기 좋은 잔잔한 소설",
                   "빗소리를 들으며 하루를 보내기에 알맞은 이야기입니다. 조용한 오후에 차 한 잔과 함께 읽으면 "
                   "마음이 편안해집니다."),
            "r3": ("비 오는 날 집에서 준비하는 면접 질문", "밖에 나가기 어려운 날 차분히 앉아 다음 도전을 "
                   "준비하게 돕습니다. 실전 감각을 미리 익혀 두면 자신감이 생깁니다.")}
    copy = ("장마철 우산과 방수 장화 세트", "장마철 우산과 방수 장화 세트, 잡화로 분류된 상품입니다.")
    standin = ChatStandIn(per_card({"비 오는 날 읽기 좋은 잔잔한 장편소설": [good["r1"]],
                                    "장마철 우산과 방수 장화 세트": [copy],
                                    "백엔드 개발자 면접 질문 모음": [good["r3"]]}))
    body = {"collection": "rec", "query": "비 오는 날 선물", "top_k": 3}
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            async with asgi_client(gateway_app(*catalog, reasoning_targets=f"127.0.0.1:{svc.port}")) as http:
                r = await http.post("/v1/recommendations", json=body)
                assert r.status_code == 200 and r.json()["reasons_status"] == "ok", r.text
                cards = {c["id"]: c for c in r.json()["cards"]}
                assert set(cards) == {"r1", "r2", "r3"}
                failed = cards["r2"]
                assert failed["reason_status"] == "failed" and "copy" in failed["reason_violations"]
                assert failed["reason_source"] == "rule" and failed["reason_short"] not in copy  # code's, not the copy
                assert cards["r1"]["reason_source"] == "model"
                assert (cards["r1"]["reason_status"], cards["r1"]["reason_short"], cards["r1"]["reason_violations"]) \
                    == ("ok", good["r1"][0], [])
                assert r.json()["usage"]["llm_calls"] == 4  # one per card, one more for r2

                r = await http.post("/v1/recommendations:stream", json=body)
                events = parse_sse(r)
                assert [e for e, _ in events] == ["cards", "reason", "reason", "reason", "reasons", "done"]
                streamed = [(d["id"], d["status"]) for _, d in events[1:4]]
                assert streamed[2] == ("r2", "failed")  # after its regeneration, behind the cards that passed
                assert sorted(streamed[:2]) == [("r1", "ok"), ("r3", "ok")]
                assert events[1][1]["short"] in (good["r1"][0], good["r3"][0])
                assert "copy" in events[3][1]["violations"] and events[3][1]["source"] == "rule"
                assert events[3][1]["short"] and events[3][1]["short"] not in copy
                assert [x["id"] for x in events[4][1]["reasons"]] == [c["id"] for c in events[0][1]["cards"]]
                assert events[-1][1]["usage"]["llm_calls"] == 4
    finally:
        standin.close()
