"""Mock interview sessions: `/v1/interviews` over a real reasoning service (port 0) and, shared, a real Redis.

The LLM is the OpenAI-compatible stand-in (bench/standin.py) answering by prompt: a question that
counts the questions already asked, or scores from the answer's length. What is checked is the
mesh's part — the follow-up rule, the prepared question served once, the last three pairs in the
prompt, answers claimed once across instances, a session continued after an instance dies, the report's
means by code — which a model's wording must not decide. The real model runs in bench/interviews.py.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import eventually_async
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
START = {"resume": "백엔드 개발자 4년. Java, Spring Boot, Redis로 주문 시스템을 운영했습니다.",
         "posting": "[백엔드 개발자] 자격: Java/Spring 3년 이상. 우대: 대용량 트래픽 경험.", "questions": 2}
LONG = ("주문 조회 API에 Redis 캐시를 두고 무효화는 주문 변경 이벤트로 처리해서, 피크 시간 응답 시간을 800ms에서 "
        "120ms로 줄였고 DB 부하도 절반으로 낮췄습니다. 캐시 키 설계와 장애 시 우회 경로는 제가 맡았습니다.")
SHORT = "캐시를 썼습니다."


def reply(body: dict) -> dict:
    """The stand-in's answer: a question numbered by the questions asked, or scores from the answer's length."""
    system, prompt = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "면접관" in system:
        asked = prompt.count("\n- ") + prompt.count("Q: ")  # listed as asked, or in the history with its answer
        kind = "꼬리" if "꼬리 질문 하나를 쓰세요" in prompt else "본"
        out = {"question": f"{kind} 질문 {asked + 1}: 주문 시스템에서 캐시를 어떻게 설계했나요?", "topic": "캐시"}
    else:
        answer = prompt.split("답변: ", 1)[1]
        score = 8 if len(answer) > 40 else 3
        crit = {"score": score, "reason": "근거"}
        out = {"criteria": {"accuracy_logic": crit, "relevance": {"score": score - 1, "reason": "근거"},
                            "expression": crit, "practical_depth": crit},
               "good_points": ["구체적"], "improvements": ["수치"], "feedback": "좋습니다."}
    return {"chunks": [json.dumps(out, ensure_ascii=False)]}


async def _prepared(http, sid: str) -> bool:
    return (await http.get(f"/v1/interviews/{sid}")).json()["prepared"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def reasoning():
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin", fresh_prompt=True)],
                                     cold=True) as svc:
            yield svc, standin
    finally:
        standin.close()


def app_on(svc, **settings):
    return gateway_app("127.0.0.1:1", "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{svc.port}", **settings)


async def test_a_session_from_start_to_report(reasoning, caplog):
    caplog.set_level(logging.DEBUG)
    svc, standin = reasoning
    async with asgi_client(app_on(svc)) as http:
        start = await http.post("/v1/interviews", json=START)
        assert start.status_code == 201, start.text
        sid, q1 = start.json()["id"], start.json()["question"]
        assert q1 == {**q1, "turn": 1, "main": 1, "follow_up": False, "source": "generated"}
        await eventually_async(lambda: _prepared(http, sid), bool, what="the next question prepared")
        second = (await http.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 1})).json()
        q2 = second["question"]
        # a long answer: the next main question, prepared while the first was answered
        assert q2["turn"] == 2 and q2["main"] == 2 and not q2["follow_up"] and q2["source"] == "prepared"
        assert q2["text"].startswith("본 질문 2")
        third = (await http.post(f"/v1/interviews/{sid}/answers", json={"answer": SHORT})).json()
        q3 = third["question"]
        # a short answer to a main question: one follow-up on it, written with that answer in the prompt
        assert q3["turn"] == 3 and q3["main"] == 2 and q3["follow_up"] and q3["text"].startswith("꼬리 질문 3")
        asked = [r for r in standin.requests if "면접관" in r["messages"][0]["content"]]
        prompt = asked[-1]["messages"][-1]["content"]  # (answers are scored in the background meanwhile)
        assert f"A: {LONG}" in prompt and f"A: {SHORT}" in prompt
        # both questions asked so far are in the prompt once, with their answers (not listed again as asked)
        assert prompt.count("\n- ") == 0 and prompt.count("Q: ") == 2
        # a short answer to a follow-up: no second follow-up, and the last main question was 2 of 2
        done = (await http.post(f"/v1/interviews/{sid}/answers", json={"answer": SHORT, "turn": 3})).json()
        assert done["status"] == "finished" and done["question"] is None and done["answered"] == 3
        again = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": SHORT, "turn": 3})
        assert again.status_code == 200 and again.json()["status"] == "finished"  # a resend is safe
        late = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": "하나 더 말씀드리면"})
        assert late.status_code == 409 and late.json()["error"]["code"] == "interview_finished"
        state = (await http.get(f"/v1/interviews/{sid}")).json()
        first = await http.post(f"/v1/interviews/{sid}/report", json={"cache": False})
        second_report = await http.post(f"/v1/interviews/{sid}/report", json={"cache": False})
    assert state["status"] == "finished" and [t["answer"] for t in state["turns"]] == [LONG, SHORT, SHORT]
    assert first.status_code == 200, first.text
    report = first.json()
    assert [a["overall"] for a in report["answers"]] == [7.8, 2.8, 2.8] and report["complete"]  # one decimal, by code
    assert report["criteria_mean"]["relevance"] == round((7 + 2 + 2) / 3, 2) and report["weakest"] == "relevance"
    assert report["overall"] == round((7.8 + 2.8 * 2) / 3, 2) and not any(a["cached"] for a in report["answers"])
    assert second_report.json()["answers"] == report["answers"]
    # answer_feedback declares reproducible sampling (the prompt read afresh); interview_question does not
    fresh = {"면접관" in r["messages"][0]["content"]: r.get("cache_prompt") for r in standin.requests}
    assert fresh == {True: None, False: False}
    assert "/v1/interviews" in caplog.text  # the access lines are there
    assert LONG[:20] not in caplog.text and SHORT not in caplog.text and q2["text"] not in caplog.text  # no text logged


def _scorings(standin) -> int:
    return sum(1 for r in standin.requests if "면접관" not in r["messages"][0]["content"])


async def test_answers_are_scored_as_they_come_and_the_report_only_gathers(reasoning):
    svc, standin = reasoning
    async with asgi_client(app_on(svc, interview_prepare=False)) as http:
        sid = (await http.post("/v1/interviews", json={**START, "questions": 1})).json()["id"]
        before = _scorings(standin)
        done = (await http.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG})).json()
        assert done["status"] == "finished"
        await eventually_async(lambda: asyncio.sleep(0, _scorings(standin)), lambda n: n == before + 1,
                               what="the answer scored in the background")
        asked = len(standin.requests)
        r = await http.post(f"/v1/interviews/{sid}/report:stream", json={})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(r)
        assert [e for e, _ in events] == ["answer", "report"]
        assert events[0][1]["turn"] == 1 and events[0][1]["overall"] == 7.8
        assert events[1][1]["grade"] == "B" and "등급 B" in events[1][1]["summary"]
        assert len(standin.requests) == asked  # the report only gathered: nothing scored when it was asked
        plain = (await http.post(f"/v1/interviews/{sid}/report", json={})).json()
        assert plain["answers"] == [events[0][1]] and plain["grade"] == "B"
        missing = await http.post("/v1/interviews/" + "0" * 32 + "/report:stream", json={})
        assert missing.status_code == 404


async def test_bad_input_and_the_refusals(reasoning):
    svc, _ = reasoning
    async with asgi_client(app_on(svc, interview_prepare=False)) as http:
        for sid in ("0" * 32, "not-an-id"):
            assert (await http.get(f"/v1/interviews/{sid}")).status_code == 404
            missing = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG})
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "interview_not_found"
        sid = (await http.post("/v1/interviews", json=START)).json()["id"]
        early = await http.post(f"/v1/interviews/{sid}/report", json={})
        assert early.status_code == 409 and early.json()["error"]["code"] == "no_answers"
        for bad in ("", "   \n", "가" * 4001):
            refused = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": bad})
            assert refused.status_code == 400 and refused.json()["error"]["fields"][0]["field"] == "answer"
        ahead = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 2})
        assert ahead.status_code == 409 and ahead.json()["error"]["code"] == "turn_not_asked"
        ok = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 1})
        assert ok.status_code == 200 and ok.json()["question"]["source"] == "generated"  # preparation off
        twice = await http.post(f"/v1/interviews/{sid}/answers", json={"answer": "다른 답", "turn": 1})
        assert twice.status_code == 409 and twice.json()["error"]["code"] == "already_answered"
        bad_start = await http.post("/v1/interviews", json={**START, "questions": 0, "kind": "casual"})
        assert bad_start.status_code == 400
        assert {f["field"] for f in bad_start.json()["error"]["fields"]} == {"questions", "kind"}


async def test_instances_share_sessions_and_one_turn_takes_one_answer(reasoning, redis_url):
    svc, _ = reasoning
    app_two = app_on(svc, redis_url=redis_url)
    async with asgi_client(app_on(svc, redis_url=redis_url)) as one, asgi_client(app_two) as two:
        sid = (await one.post("/v1/interviews", json={**START, "questions": 3})).json()["id"]
        # the same turn answered on both instances at once: one answer is recorded, the other refused
        racing = await asyncio.gather(
            one.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 1}),
            two.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG + " 추가", "turn": 1}))
        statuses = sorted(r.status_code for r in racing)
        assert statuses == [200, 409], [r.text for r in racing]
        state = (await two.get(f"/v1/interviews/{sid}")).json()
        assert len(state["turns"]) == 2 and state["turns"][0]["answer"] in (LONG, LONG + " 추가")
        # an instance that died after recording an answer, before choosing the next question: the same
        # answer sent to another instance continues the session (the answer is stored here by hand)
        redis = app_two.state.mesh.store
        await redis.hset(f"interview:{sid}", "a:2", json.dumps({"text": LONG}), 600)
        resumed = await two.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 2})
        assert resumed.status_code == 200 and resumed.json()["question"]["turn"] == 3
        again = await one.post(f"/v1/interviews/{sid}/answers", json={"answer": LONG, "turn": 2})
        assert again.json()["question"] == resumed.json()["question"]  # the same turn 3, not a second one
        final = (await one.get(f"/v1/interviews/{sid}")).json()
    assert [t["question"]["turn"] for t in final["turns"]] == [1, 2, 3] and final["expires_in_s"] > 0
