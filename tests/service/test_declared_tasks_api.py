"""Declared tasks: `RunTask` on a real reasoning service (port 0) and `/v1/tasks` over it, on a real Redis.

The LLM is the scripted OpenAI-compatible stand-in (bench/standin.py): what is checked here is the
mesh's part — input checked before any call, output validated and retried once naming the
violation, then failed explicitly; the post step's code (dates, skills and scores); the cache and
its mark; the SSE order; bad task files stopping both processes — which a model's wording must not
decide. The real model runs the tasks in bench/tasks.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import asynccontextmanager

import grpc
import pytest

from bench.standin import ChatStandIn
from clients.errors import MeshClientError
from clients.reasoning import AsyncReasoningClient, StreamError, TaskDone
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
NOTICE = "[네이버] 2027 신입 공채 1차 면접 안내: 다음 주 화요일 오후 3시, 그린팩토리"
CALENDAR = {"company": "네이버", "stage": "면접", "title": "1차 면접", "start_text": "다음 주 화요일 오후 3시",
            "end_text": ""}
RESUME = "백엔드 개발자 4년. Java, Spring Boot, MySQL, Redis로 주문 시스템을 운영했습니다."
POSTING = "[백엔드 개발자] 자격: Java/Spring 3년 이상. 우대: 대용량 트래픽 경험."
LONG_ANSWER = "저는 4년 동안 주문 시스템을 운영한 백엔드 개발자이고, 장애 대응과 캐시 설계를 주로 맡았습니다."


def says(value: object) -> dict:
    """A scripted answer: ``value`` as JSON, streamed in a few pieces."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return {"chunks": [text[i:i + 9] for i in range(0, len(text), 9)]}


def prompt_of(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"])


@asynccontextmanager
async def tasks_app(script: list[dict], **settings):
    """The gateway (ASGI) over a reasoning service whose LLM follows ``script``; and the stand-in."""
    standin = ChatStandIn(script)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app("127.0.0.1:1", "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{svc.port}", **settings)
            async with asgi_client(app) as http:
                yield http, standin
    finally:
        standin.close()


async def test_calendar_dates_are_resolved_by_code_and_a_repeat_is_a_marked_cache_hit():
    async with tasks_app([says(CALENDAR)]) as (http, standin):
        body = {"input": {"text": NOTICE, "reference_date": "2026-12-04"}}
        first = await http.post("/v1/tasks/calendar_parse", json=body)
        assert first.status_code == 200, first.text
        again = await http.post("/v1/tasks/calendar_parse", json=body)
        fresh = await http.post("/v1/tasks/calendar_parse", json={**body, "cache": False})
        listing = (await http.get("/v1/tasks")).json()
    out = first.json()
    assert out["result"]["start"] == "2026-12-08T15:00:00+09:00" and out["result"]["dates_from"] == "model"
    assert out["result"]["company"] == "네이버" and out["result"]["stage"] == "면접"
    assert out["attempts"] == 1 and not out["cached"] and out["route"] == "local" and out["usage"]["llm_calls"] == 1
    hit = again.json()
    assert hit["cached"] and hit["attempts"] == 0 and hit["result"] == out["result"] and hit["usage"] is None
    assert not fresh.json()["cached"] and len(standin.requests) == 2  # the hit called no model
    request = standin.requests[0]
    assert request["response_format"]["type"] == "json_schema" and request["temperature"] == 0
    assert request["seed"] == 7 and "다음 주 화요일 오후 3시" in prompt_of(request)
    names = {t["name"]: t for t in listing["tasks"]}
    assert set(names) == {"calendar_parse", "resume_analysis", "answer_feedback", "interview_question",
                          "spec_delta"}
    assert names["calendar_parse"]["cache_ttl_s"] == 86400 and names["calendar_parse"]["result_schema"]["properties"]


async def test_output_breaking_the_schema_is_retried_with_the_error_then_failed():
    bad = {**CALENDAR, "stage": "2차면접"}  # not in the closed list
    async with tasks_app([says(bad), says(CALENDAR)]) as (http, standin):
        r = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}})
        assert r.status_code == 200, r.text
        assert r.json()["attempts"] == 2
        retry_prompt = prompt_of(standin.requests[1])
    assert "스키마를 지키는 JSON" in retry_prompt and "stage" in retry_prompt
    async with tasks_app([says(bad)]) as (http, standin):
        r = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}})
        assert r.status_code == 502, r.text
        error = r.json()["error"]
        assert error["code"] == "invalid_output" and "stage" in error["message"]
        assert len(standin.requests) == 2
        again = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}})
        assert again.status_code == 502 and len(standin.requests) == 4  # a failure is never cached


async def test_bad_input_is_a_400_naming_the_field_before_any_model_call():
    async with tasks_app([says(CALENDAR)]) as (http, standin):
        missing = await http.post("/v1/tasks/calendar_parse", json={"input": {"txt": NOTICE}})
        zone = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE, "timezone": "Mars/X"}})
        day = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE, "reference_date": "12/4"}})
        unknown = await http.post("/v1/tasks/no_such_task", json={"input": {}})
        route = await http.post("/v1/tasks/calendar_parse", json={"input": {"text": NOTICE}, "model": "huge"})
        score = await http.post("/v1/tasks/answer_feedback", json={"input": {"question": "q", "answer": 3}})
    assert missing.status_code == 400 and {f["field"] for f in missing.json()["error"]["fields"]} >= {"input"}
    assert zone.status_code == 400 and zone.json()["error"]["fields"][0]["field"] == "input.timezone"
    assert day.status_code == 400 and day.json()["error"]["fields"][0]["field"] == "input.reference_date"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "task_not_found"
    assert route.status_code == 404 and route.json()["error"]["code"] == "model_not_found"
    assert score.status_code == 400 and score.json()["error"]["fields"][0]["field"] == "input.answer"
    assert standin.requests == []


async def test_the_stream_sends_deltas_a_retry_then_the_validated_object():
    bad = {**CALENDAR, "company": 3}
    async with tasks_app([says(bad), says(CALENDAR)]) as (http, _):
        r = await http.post("/v1/tasks/calendar_parse:stream",
                            json={"input": {"text": NOTICE, "reference_date": "2026-12-04"}})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        hit = await http.post("/v1/tasks/calendar_parse:stream",
                              json={"input": {"text": NOTICE, "reference_date": "2026-12-04"}})
    events = parse_sse(r)
    kinds = [k for k, _ in events]
    retry = kinds.index("retry")
    assert kinds[-1] == "done" and set(kinds[:retry]) == {"delta"} and set(kinds[retry + 1:-1]) == {"delta"}
    second = "".join(e["text"] for k, e in events[retry + 1:-1])
    assert json.loads(second) == CALENDAR
    done = events[-1][1]
    assert done["attempts"] == 2 and done["result"]["start"] == "2026-12-08T15:00:00+09:00"
    assert [k for k, _ in parse_sse(hit)] == ["done"] and parse_sse(hit)[0][1]["cached"]


async def test_skills_score_grade_and_overall_are_computed_not_written_by_the_model():
    analysis = {"summary": "적합", "strengths": ["Spring 운영 경험"], "weaknesses": ["대용량 경험 불명확"],
                "required_skills": ["Java/Spring", "대용량 트래픽"], "experience_fit": 90}
    names = ("accuracy_logic", "relevance", "expression", "practical_depth")
    feedback = {"criteria": {n: {"score": s, "reason": "근거"} for n, s in zip(names, (8, 7, 6, 8), strict=True)},
                "good_points": ["a"], "improvements": ["b"], "feedback": "c"}
    async with tasks_app([says(analysis), says(feedback)]) as (http, _):
        a = await http.post("/v1/tasks/resume_analysis", json={"input": {"resume": RESUME, "posting": POSTING}})
        f = await http.post("/v1/tasks/answer_feedback", json={"input": {"question": "자기소개를 해 주세요.",
                                                                         "answer": LONG_ANSWER}})
    assert a.status_code == 200, a.text
    result = a.json()["result"]
    assert result["skills_found"] == ["Java", "Spring"] and result["skills_missing"] == ["대용량 트래픽"]
    assert result["match_score"] == round(0.6 * 100 * 2 / 3 + 0.4 * 90) == 76 and result["grade"] == "B"
    assert f.status_code == 200, f.text
    assert f.json()["result"]["overall"] == 7.2


async def test_run_task_over_grpc_checks_the_task_its_version_and_its_input():
    standin = ChatStandIn([says(CALENDAR)])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            client = AsyncReasoningClient(f"127.0.0.1:{svc.port}")
            try:
                codes = {}
                for name, call in {
                    "unknown": lambda: client.run_task("no_such_task", {}),
                    "version": lambda: client.run_task("calendar_parse", {"text": NOTICE}, version=99),
                    "input": lambda: client.run_task("calendar_parse", {"text": ""}),
                    "date": lambda: client.run_task("calendar_parse", {"text": NOTICE, "reference_date": "어제"}),
                }.items():
                    with pytest.raises(MeshClientError) as err:
                        async for _ in call():
                            pass
                    codes[name] = (err.value.code, [v.field for v in getattr(err.value, "violations", [])])
                assert standin.requests == []  # nothing reached the model
                events = [e async for e in client.run_task("calendar_parse", {"text": NOTICE,
                                                                              "reference_date": "2026-12-04"},
                                                           version=1)]
            finally:
                await client.close()
    finally:
        standin.close()
    assert codes["unknown"][0] == grpc.StatusCode.NOT_FOUND
    assert codes["version"][0] == grpc.StatusCode.FAILED_PRECONDITION
    assert codes["input"] == (grpc.StatusCode.INVALID_ARGUMENT, ["input.text"])
    assert codes["date"] == (grpc.StatusCode.INVALID_ARGUMENT, ["input.reference_date"])
    done = events[-1]
    assert isinstance(done, TaskDone) and not any(isinstance(e, StreamError) for e in events)
    assert done.output == CALENDAR and done.result["start"] == "2026-12-08T15:00:00+09:00" and done.attempts == 1
    assert "".join(e.text for e in events[:-1]) == json.dumps(CALENDAR, ensure_ascii=False)


async def test_the_response_cache_lives_in_redis_and_is_shared_by_instances(redis_url):
    standin = ChatStandIn([says(CALENDAR)])
    body = {"input": {"text": NOTICE, "reference_date": "2026-12-04"}}
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            def app():
                return gateway_app("127.0.0.1:1", "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{svc.port}",
                                   redis_url=redis_url)
            async with asgi_client(app()) as one, asgi_client(app()) as two:
                first = await one.post("/v1/tasks/calendar_parse", json=body)
                second = await two.post("/v1/tasks/calendar_parse", json=body)
                later = await two.post("/v1/tasks/calendar_parse",
                                       json={"input": {**body["input"], "reference_date": "2026-12-11"}})
    finally:
        standin.close()
    assert first.status_code == 200 and not first.json()["cached"], first.text
    assert second.json()["cached"] and second.json()["result"] == first.json()["result"]
    # another reference date is another input: asked again, its dates resolved against that day
    assert later.status_code == 200 and not later.json()["cached"]
    assert later.json()["result"]["start"] == "2026-12-15T15:00:00+09:00"
    assert len(standin.requests) == 2


@pytest.mark.parametrize("module", ["services.reasoning", "gateway"])
async def test_a_bad_task_file_stops_the_process_with_one_line(tmp_path, module):
    (tmp_path / "broken.yaml").write_text("name: broken\nversion: 0\n", encoding="utf-8")
    args = [sys.executable, "-m", module, "--tasks-dirs", str(tmp_path), "--port", "0"]
    if module == "gateway":
        args.append("--allow-no-auth")
    proc = await asyncio.to_thread(subprocess.run, args, capture_output=True, text=True, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert "broken.yaml: version" in lines[-1] and "error" in lines[-1]
