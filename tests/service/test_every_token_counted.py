"""Every LLM token the mesh is served is counted to the key that caused it (issue 76).

The LLM is the OpenAI-compatible stand-in (bench/standin.py), which counts the tokens its answers
reported (``served_tokens``: what a priced backend would bill). Every LLM route, the search with
``expand``, the answer with history (its rewrite), the interview's work ahead, the assistant's turn and
a conversation's list job run through the real middleware and a real reasoning service, one at a time,
with one key; after each, the key's ledger (``GET /v1/usage``) must have grown by exactly what the
stand-in served (waiting for work a request leaves behind). A route whose usage is dropped fails,
naming the route. Caches are off (a cached answer calls no model, and is neither served nor counted).
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn, schema_or
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.catalogs import GIFT_ATTRIBUTES, GIFT_CATALOG, GIFT_CATEGORIES
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
KEY = {"X-API-Key": "ledger-key-000001"}
HISTORY = [{"role": "user", "content": "아내 생일 선물을 찾고 있어요"}, {"role": "assistant", "content": "예산은요?"}]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mesh(embedding_service, retrieval_port):
    standin = ChatStandIn(schema_or("네, 알겠습니다"))
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}",
                              api_keys=KEY["X-API-Key"], answer_cache=False, answer_min_relevance=0.0,
                              )
            async with asgi_client(app) as http:
                r = await http.post("/v1/collections", json={"name": "ledger-gifts", "fields": GIFT_CATALOG["fields"]},
                                    headers=KEY)
                assert r.status_code == 201, r.text
                job = (await http.post("/v1/collections/ledger-gifts/documents",
                                       json={"documents": GIFT_CATALOG["items"][:12]}, headers=KEY)).json()
                for _ in range(300):
                    if (await http.get(f"/v1/jobs/{job['id']}", headers=KEY)).json()["state"] == "succeeded":
                        break
                    await asyncio.sleep(0.1)
                yield http, standin
    finally:
        standin.close()


async def counted(http) -> int:
    total = (await http.get("/v1/usage", headers=KEY)).json()["total"]
    return total["prompt_tokens"] + total["completion_tokens"]


async def settled(http, standin, before: tuple[int, int], timeout_s: float = 15.0) -> tuple[int, int]:
    """(served, counted) deltas once both stopped moving (work left behind included) or time ran out."""
    last, still = None, 0
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        now = (standin.served_tokens - before[0], await counted(http) - before[1])
        if now == last and now[0] == now[1]:
            still += 1
            if still >= 3:
                return now
        else:
            still = 0
        last = now
        await asyncio.sleep(0.3)
    return last or (0, 0)


async def test_the_ledger_equals_the_tokens_the_llm_served_on_every_llm_route_and_job(mesh):
    http, standin = mesh
    conversation = (await http.post("/v1/conversations", json={
        "collection": "ledger-gifts", "categories": GIFT_CATEGORIES, "attributes": GIFT_ATTRIBUTES},
        headers=KEY)).json()["id"]
    steps: list[tuple[str, str, str, dict | None]] = [
        ("chat", "POST", "/v1/chat", {"session_id": "s1", "message": "안녕하세요"}),
        ("chat completions", "POST", "/v1/chat/completions",
         {"model": "local", "messages": [{"role": "user", "content": "안녕"}], "max_tokens": 16}),
        ("summaries", "POST", "/v1/summaries", {"text": "회의에서 다음 분기 예산을 정했다. 인력은 두 명 늘린다."}),
        ("search with expand", "POST", "/v1/search",
         {"collection": "ledger-gifts", "query": "아내 생일 선물", "expand": {"n": 3}}),
        ("answers with history (rewrite)", "POST", "/v1/answers",
         {"collection": "ledger-gifts", "question": "그럼 10만 원 이하로는?", "history": HISTORY}),
        ("answers:stream with history", "POST", "/v1/answers:stream",
         {"collection": "ledger-gifts", "question": "꽃은 어때요?", "history": HISTORY}),
        ("recommendations", "POST", "/v1/recommendations", {"collection": "ledger-gifts", "query": "부모님 선물"}),
        ("recommendations:stream", "POST", "/v1/recommendations:stream",
         {"collection": "ledger-gifts", "query": "친구 집들이 선물"}),
        ("task", "POST", "/v1/tasks/calendar_parse", {"input": {"text": "다음 주 화요일 오후 3시 한빛 면접"}}),
        ("task:stream", "POST", "/v1/tasks/calendar_parse:stream", {"input": {"text": "금요일 10시 코딩 테스트"}}),
        ("conversation turn", "POST", f"/v1/conversations/{conversation}/turns", {"text": "아내 생일 선물 찾는데요"}),
        ("conversation turn:stream", "POST", f"/v1/conversations/{conversation}/turns:stream",
         {"text": "예산은 10만 원이에요"}),
        ("conversation confirm", "POST", f"/v1/conversations/{conversation}:confirm", {}),
        ("interview (questions written ahead)", "POST", "/v1/interviews",
         {"resume": "백엔드 개발 3년, 결제 시스템", "posting": "핀테크 백엔드", "questions": 2}),
    ]
    missed = []
    for name, method, path, body in steps:
        before = (standin.served_tokens, await counted(http))
        r = await http.request(method, path, json=body, headers={**KEY, "X-Request-Timeout-Ms": "30000"})
        assert r.status_code in (200, 201, 202), (name, r.text[:300])
        served, seen = await settled(http, standin, before)
        if served != seen or served == 0:
            missed.append(f"{name}: the LLM served {served} tokens, the ledger counted {seen}")
        if name.startswith("interview"):
            interview = r.json()["id"]
    for name, path, body in (
            ("interview answer (scored ahead)", f"/v1/interviews/{interview}/answers",
             {"answer": "결제 시스템에서 멱등 키로 중복 결제를 막았습니다."}),
            ("interview report", f"/v1/interviews/{interview}/report", {}),
            ("conversation list job", f"/v1/conversations/{conversation}/lists", {})):
        before = (standin.served_tokens, await counted(http))
        r = await http.post(path, json=body, headers=KEY)
        assert r.status_code in (200, 201, 202), (name, r.text[:300])
        if name == "conversation list job":
            job = r.json()["id"]
            for _ in range(300):
                state = (await http.get(f"/v1/conversations/{conversation}/lists/{job}", headers=KEY)).json()
                if state["state"] in ("succeeded", "failed"):
                    break
                await asyncio.sleep(0.1)
        served, seen = await settled(http, standin, before)
        if served != seen or (served == 0 and name != "interview report"):
            missed.append(f"{name}: the LLM served {served} tokens, the ledger counted {seen}")
    session = (await http.post("/v1/assistant/sessions", json={"collections": ["ledger-gifts"], "caller": "1"},
                               headers=KEY)).json()["id"]
    before = (standin.served_tokens, await counted(http))
    r = await http.post(f"/v1/assistant/sessions/{session}/messages", json={"text": "아내 생일 선물 추천해 줘"},
                        headers=KEY)
    assert r.status_code == 200, r.text[:300]
    served, seen = await settled(http, standin, before)
    if served != seen or served == 0:
        missed.append(f"assistant turn: the LLM served {served} tokens, the ledger counted {seen}")
    assert not missed, "\n".join(missed)
    by_route = {row["group"] for row in (await http.get("/v1/usage", params={"group_by": "route"},
                                                        headers=KEY)).json()["rows"]}
    assert "/v1/search" in by_route and any(g.startswith("job:") for g in by_route), by_route
