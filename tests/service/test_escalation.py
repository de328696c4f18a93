"""Cheap model first: a route that escalates asks its larger route once when code refuses its output.

Two reasoning services (port 0), each over its own scripted stand-in LLM (bench/standin.py): the
"small" route's and the "large" route's calls are counted apart. Answers escalate on an answer code
finds unsupported; tasks on output that broke the schema twice. The embedded model pair (0.5B →
1.5B) is measured in bench/escalation.py.
"""

from __future__ import annotations

import json
import uuid
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.answering import answer_json
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = [{"id": "ship", "text": "평일 오후 2시 전에 결제하면 당일 출고됩니다. 반품은 받은 날부터 14일 안에 신청할 수 "
                               "있습니다.", "payload": {"title": "배송 안내"}}]
QUESTION = "반품은 며칠 안에 신청해야 하나요?"
SUPPORTED = answer_json(True, "반품은 받은 날부터 14일 안에 신청할 수 있습니다.", [2])
UNSUPPORTED = answer_json(True, "반품은 30일 안에 고객센터에 전화로 신청합니다.", [2])
NOTICE = "[네이버] 2027 신입 공채 1차 면접 안내: 다음 주 화요일 오후 3시, 그린팩토리"
CALENDAR = {"company": "네이버", "stage": "면접", "title": "1차 면접", "start_text": "다음 주 화요일 오후 3시",
            "end_text": ""}


def says(value: dict) -> dict:
    text = json.dumps(value, ensure_ascii=False)
    return {"chunks": [text[i:i + 9] for i in range(0, len(text), 9)]}


@asynccontextmanager
async def two_routes(small: list[dict], large: list[dict], embedding: str | int = "127.0.0.1:1",
                     retrieval: str | int = "127.0.0.1:1"):
    """The gateway over routes ``small`` (the default, escalating to ``large``) and ``large``; both stand-ins."""
    standins = (ChatStandIn(small), ChatStandIn(large))
    try:
        async with AsyncExitStack() as stack:
            ports = [(await stack.enter_async_context(
                running_reasoning([OpenAIBackend("s", s.url, "standin")], cold=True))).port for s in standins]
            routes = {"small": {"targets": f"127.0.0.1:{ports[0]}", "escalate": "large"},
                      "large": {"targets": f"127.0.0.1:{ports[1]}"}}
            app = gateway_app(embedding, retrieval, model_routes=json.dumps(routes), default_model_route="small",
                              answer_min_relevance=0.0)
            http = await stack.enter_async_context(asgi_client(app))
            yield http, standins
    finally:
        for s in standins:
            s.close()


async def shipping(http) -> str:
    name = f"esc-{uuid.uuid4().hex[:8]}"
    assert (await http.post("/v1/collections", json={"name": name, "fields": {}})).status_code == 201
    job = (await http.post(f"/v1/collections/{name}/documents", json={"documents": DOCS})).json()
    assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
    return name


async def test_an_unsupported_answer_is_asked_once_of_the_larger_route(embedding_service, retrieval_port):
    async with two_routes([UNSUPPORTED], [SUPPORTED], embedding_service.port, retrieval_port) as (http, (s, big)):
        name = await shipping(http)
        r = await http.post("/v1/answers", json={"collection": name, "question": QUESTION, "cache": False})
        out = r.json()
        assert out["answerable"] and "14일" in out["answer"] and out["answered_by"] == "large"
        assert out["escalation"]["route"] == "small" and out["escalation"]["reason"] == "unsupported"
        assert out["escalation"]["usage"]["llm_calls"] >= 1
        assert len(s.requests) == 1 and len(big.requests) == 1
        assert s.requests[0]["messages"] == big.requests[0]["messages"], "the same prompt"
        # Streamed, the refused answer is never shown: one delta, the larger route's.
        r = await http.post("/v1/answers:stream", json={"collection": name, "question": QUESTION, "cache": False})
        events = parse_sse(r)
        assert [e for e, _ in events] == ["passages", "delta", "done"] and "14일" in events[1][1]["text"]


async def test_a_supported_answer_never_reaches_the_larger_route(embedding_service, retrieval_port):
    async with two_routes([SUPPORTED], [SUPPORTED], embedding_service.port, retrieval_port) as (http, (s, big)):
        name = await shipping(http)
        out = (await http.post("/v1/answers", json={"collection": name, "question": QUESTION})).json()
        assert out["answered_by"] == "small" and out["escalation"] is None
        assert len(s.requests) == 1 and big.requests == []


async def test_a_task_output_breaking_the_schema_twice_escalates_once():
    bad = says({**CALENDAR, "stage": "2차면접"})  # not in the closed list, on both tries
    async with two_routes([bad], [says(CALENDAR)]) as (http, (s, big)):
        r = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}, "cache": False})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["route"] == "large" and out["escalation"] == {"route": "small", "reason": "invalid_output",
                                                                  "usage": None}
        assert len(s.requests) == 2 and len(big.requests) == 1
        r = await http.post("/v1/tasks/calendar_parse:stream", json={"input": {"text": NOTICE}, "cache": False})
        kinds = [e for e, _ in parse_sse(r)]
        assert "escalate" in kinds and kinds[-1] == "done"
        assert kinds.index("escalate") > kinds.index("retry")
    async with two_routes([bad], [bad]) as (http, (s, big)):  # the larger one fails too: 502, asked once
        r = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}, "cache": False})
        assert r.status_code == 502 and len(big.requests) == 2


async def test_an_escalation_to_no_route_is_refused_at_start():
    from gateway.config import GatewaySettings

    with pytest.raises(ValueError, match="escalate"):
        GatewaySettings(model_routes=json.dumps({"small": {"targets": "127.0.0.1:1", "escalate": "huge"}}),
                        default_model_route="small")
