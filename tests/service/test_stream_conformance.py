"""The contract describes its streams (issue 82): every streamed event has a schema in the served spec.

Every streaming operation of the served spec declares its events (``x-itemSchema``, generated from the
models the code sends: gateway/http/streams.py). The service tests that read a stream read it through
``support.apps.parse_sse(response)``, which checks every event received against the operation's spec
(tests/support/sse.py): an event name, a field or a value the spec does not declare fails them. Those
tests cover the seven event streams: answers (tests/service/test_gateway_answers.py, test_answer_cache.py,
test_escalation.py), recommendations and chat (test_gateway_reasoning.py), tasks (test_declared_tasks_api.py,
test_escalation.py), conversation turns (test_conversation_lists.py), interview reports
(test_interviews_api.py) and assistant turns (test_assistant.py). This module checks the declarations
themselves, the eighth stream (OpenAI's chunks) and `error` events (a stalled chat, a task whose output
never parses) against a reasoning service over a stand-in model (the real one answers in
tests/service/test_chat_completions.py, whose SDK parses the chunks). After a run, the terminal summary
lists the declared events no test received (tests/conftest.py).
"""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from gateway.http.streams import ITEM_SCHEMA, TextDelta
from gateway.openai_api.chat_protocol import STREAM as CHUNKS
from gateway.tasks import protocol as tasks_api
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning
from support.sse import check, spec

SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")
STREAMING = {("post", "/v1/answers:stream"), ("post", "/v1/recommendations:stream"), ("post", "/v1/chat"),
             ("post", "/v1/tasks/{name}:stream"), ("post", "/v1/conversations/{conversation_id}/turns:stream"),
             ("post", "/v1/interviews/{interview_id}/report:stream"),
             ("post", "/v1/assistant/sessions/{session_id}/messages"), ("post", "/v1/chat/completions")}


def test_every_streaming_operation_declares_each_event_with_a_schema():
    streaming = {(method, path) for path, ops in spec()["paths"].items() for method, op in ops.items()
                 if "text/event-stream" in op.get("responses", {}).get("200", {}).get("content", {})}
    assert streaming == STREAMING
    schemas = spec()["components"]["schemas"]
    for method, path in streaming:
        item = spec()["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"][ITEM_SCHEMA]
        names = [v["properties"]["event"]["const"] for v in item["oneOf"]]
        assert names and (path == "/v1/chat/completions" or "error" in names), (path, names)
        for variant in item["oneOf"]:
            data = variant["properties"]["data"]
            assert "const" in data or data["contentSchema"]["$ref"].split("/")[-1] in schemas, (path, variant)


def test_an_event_without_its_declared_model_cannot_be_written():
    with pytest.raises(TypeError, match="not declared"):
        tasks_api.STREAM.send("progress", TextDelta(text="x"))
    with pytest.raises(TypeError, match="not declared"):
        tasks_api.STREAM.send("delta", tasks_api.RetryEvent(attempt=2, error="x"))
    assert tasks_api.STREAM.send("delta", TextDelta(text="안녕")) == 'event: delta\ndata: {"text": "안녕"}\n\n'.encode()
    with pytest.raises(TypeError):
        CHUNKS.line("[END]")


def test_the_checker_refuses_an_undeclared_event_or_field():
    with pytest.raises(AssertionError, match="does not declare"):
        check("POST", "/v1/tasks/calendar_parse:stream", "progress", "{}")
    with pytest.raises(AssertionError, match="does not match"):
        check("POST", "/v1/tasks/calendar_parse:stream", "delta", json.dumps({"text": "a", "extra": 1}))
    with pytest.raises(AssertionError, match="does not match"):
        check("POST", "/v1/chat", "done", json.dumps({"finish_reason": "stop"}))
    assert check("POST", "/v1/chat/completions", "message", "[DONE]") == "[DONE]"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chat_gateway(embedding_service):
    standin = ChatStandIn([{"chunks": ["안녕", "하세요"]}])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as reasoning:
            app = gateway_app(embedding_service.port, "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{reasoning.port}")
            async with asgi_client(app, timeout=60) as http:
                yield http
    finally:
        standin.close()


@SESSION_LOOP
async def test_openai_chunks_conform_to_the_spec(chat_gateway):
    r = await chat_gateway.post("/v1/chat/completions", json={
        "model": "local", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "인사해 줘"}]})
    assert r.status_code == 200, r.text
    events = parse_sse(r)
    assert [e for e, _ in events] == ["message"] * len(events) and events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "안녕하세요"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


@SESSION_LOOP
async def test_chat_deltas_and_done_conform_to_the_spec(chat_gateway):
    r = await chat_gateway.post("/v1/chat", json={"session_id": "s1", "message": "인사해 줘"})
    assert r.status_code == 200, r.text
    events = parse_sse(r)
    assert [e for e, _ in events] == ["delta", "delta", "done"] and events[-1][1]["usage"]["llm_calls"] == 1


@SESSION_LOOP
async def test_error_events_conform_to_the_spec(embedding_service):
    """A chat that stalls after its first piece, and a task whose output never parses, end in `error` events."""
    standin = ChatStandIn([{"chunks": ["안녕", "하세요"], "stall_after": 1}])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as reasoning:
            app = gateway_app(embedding_service.port, "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{reasoning.port}",
                              reasoning_generation_s=1.0, reasoning_total_s=2.0)
            async with asgi_client(app, timeout=60) as http:
                r = await http.post("/v1/chat", json={"session_id": "s2", "message": "인사해 줘"})
                assert r.status_code == 200, r.text
                events = parse_sse(r)
                assert [e for e, _ in events] == ["delta", "error"], events
                standin.script[:] = [{"chunks": ["JSON이 아닌 답"]}]
                r = await http.post("/v1/tasks/calendar_parse:stream",
                                    json={"input": {"text": "다음 주 화요일 3시 면접"}, "cache": False})
                assert r.status_code == 200, r.text
                kinds = [e for e, _ in parse_sse(r)]
                assert kinds[-1] == "error" and "done" not in kinds, kinds
    finally:
        standin.close()
