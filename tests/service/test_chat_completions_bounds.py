"""`/v1/chat/completions` refuses grammars that would tie up the LLM, and a backend's refusal is the caller's 400.

The gateway (ASGI) over a real reasoning service on port 0 whose LLM is the scripted OpenAI-compatible
stand-in (bench/standin.py): what is checked is that a caller's schema is bounded before any backend
sees it (the stand-in receives nothing), fast, with the field named; that a backend's own 4xx answer
is a 400, not a retryable 503; and that ``stream_options`` needs ``stream``.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

import pytest

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
USER = [{"role": "user", "content": "고르세요"}]


@asynccontextmanager
async def gateway(embedding_service, script):
    standin = ChatStandIn(script)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{svc.port}")
            async with asgi_client(app) as http:
                yield http, standin
    finally:
        standin.close()


def fmt(schema):
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def nested(depth):
    node: dict = {"type": "string"}
    for _ in range(depth):
        node = {"type": "array", "items": node}
    return node


CASES = [
    ("enum of 20,000", {"response_format": fmt({"type": "object", "properties": {
        "city": {"enum": [f"도시{i}" for i in range(20000)]}}})}, "response_format.json_schema"),
    ("minItems 5000", {"response_format": fmt({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 5000}}})}, "minItems"),
    ("maxLength 10**6 in a tool", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 10**6}}}}}]}, "maxLength"),
    ("nesting 40 deep", {"response_format": fmt({"type": "object", "properties": {"a": nested(40)}})}, "nested"),
]


@pytest.mark.parametrize(("name", "extra", "named"), CASES, ids=[c[0] for c in CASES])
async def test_a_schema_past_the_grammar_bounds_is_400_naming_it_before_any_backend_sees_it(
        embedding_service, name, extra, named):
    async with gateway(embedding_service, [{"chunks": ['{"city": "서울"}']}]) as (http, standin):
        t = time.perf_counter()
        r = await http.post("/v1/chat/completions", json={"model": "local", "messages": USER, **extra})
        took = time.perf_counter() - t
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert named in (err["param"] or "") + err["message"], err
    assert standin.requests == [] and took < 2.0


async def test_a_backends_own_refusal_is_the_callers_400_not_a_503(embedding_service):
    async with gateway(embedding_service, [{"status": 400}]) as (http, standin):
        r = await http.post("/v1/chat/completions", json={"model": "local", "messages": USER})
    assert r.status_code == 400, r.text
    assert len(standin.requests) == 1, "not failed over nor retried: the same request is as wrong everywhere"


async def test_stream_options_without_stream_is_400(embedding_service):
    async with gateway(embedding_service, [{"chunks": ["네"]}]) as (http, standin):
        r = await http.post("/v1/chat/completions", json={"model": "local", "messages": USER,
                                                          "stream_options": {"include_usage": True}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream_options", r.text
    assert standin.requests == []


async def test_a_route_that_differs_by_model_only_moves_chat_and_summaries(embedding_service):
    """`model_routes` naming the same instances with another backend model: every feature asks for that model."""
    import json as _json

    standin = ChatStandIn([{"chunks": ["네, 알겠습니다."]}])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            target = f"127.0.0.1:{svc.port}"
            routes = _json.dumps({"local": {"targets": target}, "big": {"targets": target, "model": "big-model"}})
            app = gateway_app(embedding_service.port, "127.0.0.1:1", reasoning_targets=target, model_routes=routes,
                              default_model_route="local", chat_route="big", summaries_route="big")
            async with asgi_client(app) as http:
                r = await http.post("/v1/chat", json={"session_id": "s1", "message": "안녕하세요"})
                assert r.status_code == 200, r.text
                r = await http.post("/v1/summaries", json={"text": "회의는 내일 오전 열 시에 열립니다."})
                assert r.status_code == 200, r.text
                r = await http.post("/v1/chat/completions", json={"model": "local", "messages": USER})
                assert r.status_code == 200, r.text
    finally:
        standin.close()
    assert [q["model"] for q in standin.requests] == ["big-model", "big-model", "standin"]
