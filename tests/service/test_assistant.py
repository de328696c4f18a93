"""``/v1/assistant`` (issue 61): sessions whose turns search, call tools on the server and answer.

Real embedding and retrieval services (the career documents of bench/data/assistant_docs.json ingested), a
real reasoning service over the OpenAI-compatible stand-in (bench/standin.py), whose replies depend on
the request: the tool choice, the grounded answer (which cites the sentence the prompt numbers) and the
reply after a tool. A backend tool is a loopback HTTP stand-in. What is checked is the mesh's part: the
events and their order, the checks, the session kept, the errors. The real model runs in bench/assistant.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn, ToolBackendStandIn
from gateway.assistant.serving import KOREAN_FALLBACK
from services.reasoning.backends.openai_http import OpenAIBackend
from support import job_finished
from support.apps import asgi_client, gateway_app, parse_sse
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = json.loads((Path(__file__).parents[2] / "bench" / "data" / "assistant_docs.json").read_text(encoding="utf-8"))
CHOICES = {  # the stand-in model's tool choice per message
    "한빛소프트웨어 채용 절차가 어떻게 돼?": {"tool": "search", "arguments": {"query": "한빛소프트웨어 채용 절차"}},
    "한빛소프트웨어 주차 지원은 있어?": {"tool": "search", "arguments": {"query": "한빛소프트웨어 주차 지원"}},
    "안녕하세요! 오늘 좀 떨리네요": {"tool": "reply_directly", "answer": "안녕하세요! 떨리는 마음 충분히 이해해요."},
    "판교 백엔드 공고 찾아줘": {"tool": "job_postings", "arguments": {"role": "백엔드", "location": "판교"}},
    "판교 백엔드 공고 느린 걸로 찾아줘": {"tool": "slow_postings", "arguments": {"role": "백엔드"}},
    "방금 찾은 공고 회사 이름이 뭐였지?": {"tool": "reply_directly", "answer": "한빛소프트웨어예요."},
    "그 회사 자기계발비는 얼마야?": {"tool": "reply_directly", "answer": "연 150만 원까지 지원돼요."},
    "오늘 저녁 뭐 먹지?": {"tool": "reply_directly", "answer": "따뜻한 국물 요리는 어때요?"},
}


def reply(body: dict) -> dict:
    prompt = "\n".join(m.get("content") or "" for m in body["messages"])
    schema = json.dumps((body.get("response_format") or {}).get("json_schema", {}).get("schema", {}))
    if '"answerable"' in schema:  # the grounded answer: cite the numbered sentence holding the fact, if any
        question = re.findall(r"질문: (.*)", body["messages"][-1]["content"])
        m = re.search(r"<(\d+)>[^<]*전체 기간은 약 4주", prompt) if question and "절차" in question[-1] else None
        out = {"answerable": bool(m), "answer": "서류, 코딩테스트, 두 번의 면접 순서로 약 4주가 걸립니다." if m else "",
               "evidence": [int(m.group(1))] if m else []}
        return {"chunks": [json.dumps(out, ensure_ascii=False)]}
    if body.get("response_format"):  # the tool choice
        last = body["messages"][-1]["content"]
        if last.startswith("No tool fits") and "몇 분 동안" in prompt:  # asked again after a declined call
            last = "몇 분 동안"
        if "몇 분 동안" in last:  # a wrong calendar call while it is offered, then a direct reply
            return {"chunks": [json.dumps({"tool": "calendar_parse", "arguments": {}}
                                          if "calendar_parse" in schema else
                                          {"tool": "reply_directly", "answer": "보통 두 시간 안팎이에요."},
                                          ensure_ascii=False)]}
        if "텀블러" in last and '"answer_feedback"' in schema:  # a task with an answer the model made up
            made_up = "텀블러는 일반적으로 1시간 이상 보온이 됩니다."
            choice = {"tool": "answer_feedback",
                      "arguments": {"question": "텀블러는 몇 시간 동안 보온이 돼?", "answer": made_up}}
        elif "문제는 몇 개" in last and '"resume_analysis"' in schema:  # arguments in a script nobody wrote, twice
            choice = {"tool": "resume_analysis", "arguments": {"resume": "題目 三個", "posting": "題目"}}
        elif "문제는 몇 개" in last:
            choice = {"tool": "reply_directly", "answer": "보통 3~4문제가 나와요."}
        elif "텀블러" in last:
            choice = {"tool": "reply_directly", "answer": "보통 여섯 시간이에요."}
        elif "계속 찾아줘" in prompt and '"job_postings"' in schema:  # a model that would call it again and again
            choice = {"tool": "job_postings", "arguments": {"role": "백엔드"}}
        elif "계속 찾아줘" in prompt:
            choice = {"tool": "reply_directly", "answer": "찾은 공고를 정리했어요."}
        elif last == "고마워!":  # English first; Korean once told the person wrote Korean
            told = "반드시 한국어로 답하세요" in body["messages"][0]["content"]
            choice = {"tool": "reply_directly", "answer": "천만에요! 면접 잘 보세요." if told else "You're welcome!"}
        elif last == "정말 고마워요!":  # English every time
            choice = {"tool": "reply_directly", "answer": "Thank you too, good luck!"}
        elif last.startswith("Result of the tool call"):
            choice = {"tool": "reply_directly", "answer": "판교에서 백엔드 공고 1건을 찾았어요."}
        else:
            choice = next((v for k, v in CHOICES.items() if k in last), {"tool": "reply_directly", "answer": "네."})
        return {"chunks": [json.dumps(choice, ensure_ascii=False)]}
    if "몇 분 동안" in body["messages"][-1]["content"]:  # asked again with no tool left to offer
        return {"chunks": ["보통 두 시간 안팎이에요."]}
    if "error:" in body["messages"][-1]["content"]:  # the reply after a failed tool, offered no tools
        return {"chunks": ["공고 검색이 ", "지금은 안 돼요."]}
    return {"chunks": ["찾은 공고를 ", "정리했어요."]}  # the reply after the last round, offered no tools


@pytest.fixture(scope="module")
def backend():
    standin = ToolBackendStandIn(slow_s=1.5)
    yield standin.base
    standin.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def assistant(embedding_service, retrieval_port, backend, tmp_path_factory):
    schema = {"type": "object", "required": ["role"], "additionalProperties": False,
              "properties": {"role": {"type": "string", "minLength": 1}, "location": {"type": "string"}}}
    tools = tmp_path_factory.mktemp("tools") / "tools.json"
    tools.write_text(json.dumps({"allowed_hosts": ["127.0.0.1"], "tools": [
        {"name": "job_postings", "description": "채용 공고 검색", "parameters": schema, "url": f"{backend}/ok",
         "secret": "assistant-tests-secret"},
        {"name": "slow_postings", "description": "느린 채용 공고 검색", "parameters": schema,
         "url": f"{backend}/slow", "timeout_s": 0.5, "secret": "assistant-tests-secret"}]}), encoding="utf-8")
    standin = ChatStandIn(reply)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}",
                              assistant_tools_file=str(tools), answer_min_relevance=0.0)
            async with asgi_client(app) as http_client:
                r = await http_client.post("/v1/collections", json={"name": "career", "fields": {"kind": "keyword"}})
                assert r.status_code == 201, r.text
                job = (await http_client.post("/v1/collections/career/documents",
                                              json={"documents": DOCS["documents"]})).json()
                assert (await job_finished(http_client, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
                yield http_client, standin
    finally:
        standin.close()


async def _session(http_client, **body) -> str:
    r = await http_client.post("/v1/assistant/sessions", json={"collections": ["career"], "caller": "user-7", **body})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _turn(http_client, sid: str, text: str) -> list[tuple[str, dict]]:
    r = await http_client.post(f"/v1/assistant/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 200, r.text
    return parse_sse(r)


async def test_a_search_turn_answers_with_checked_citations_and_the_session_keeps_it(assistant):
    http_client, _ = assistant
    sid = await _session(http_client)
    events = await _turn(http_client, sid, "한빛소프트웨어 채용 절차가 어떻게 돼?")
    assert [e for e, _ in events] == ["tool_call", "tool_result", "answer", "done"]
    assert events[0][1] == {"name": "search", "arguments": {"query": "한빛소프트웨어 채용 절차"}, "by": "model"}
    answer = events[2][1]
    assert answer["answerable"] and "4주" in answer["text"]
    assert [c["id"] for c in answer["citations"]] == ["hanbit-process"]
    assert events[-1][1]["tool"] == "search" and events[-1][1]["turn"] == 1
    state = (await http_client.get(f"/v1/assistant/sessions/{sid}")).json()
    assert state["turns"][0]["citations"] == ["hanbit-process"] and state["turns"][0]["tool"] == "search"
    refused = await _turn(http_client, sid, "한빛소프트웨어 주차 지원은 있어?")  # the documents do not say
    answer = dict(refused)["answer"]
    assert not answer["answerable"] and answer["citations"] == [] and "확인할 수 없습니다" in answer["text"]


async def test_small_talk_streams_a_reply_without_a_tool(assistant):
    http_client, _ = assistant
    sid = await _session(http_client)
    events = await _turn(http_client, sid, "안녕하세요! 오늘 좀 떨리네요")
    assert [e for e, _ in events][-1] == "done" and "tool_call" not in [e for e, _ in events]
    assert "".join(d["text"] for e, d in events if e == "delta") == "안녕하세요! 떨리는 마음 충분히 이해해요."


async def test_a_backend_tool_is_called_with_the_caller_then_served_from_its_cache(assistant):
    http_client, standin = assistant
    sid = await _session(http_client)
    first = await _turn(http_client, sid, "판교 백엔드 공고 찾아줘")
    assert [e for e, _ in first][:2] == ["tool_call", "tool_result"] and first[-1][0] == "done"
    result = first[1][1]
    assert result["name"] == "job_postings" and not result["cached"]
    assert '"caller":"anonymous:user-7"' in result["summary"]  # the key's id (keys off: anonymous), then the caller
    # The reply after the tool saw the tool's result in its prompt, and could have called another tool.
    assert '"role":"백엔드"' in standin.requests[-1]["messages"][-1]["content"]
    assert "".join(d["text"] for e, d in first if e == "delta") == "판교에서 백엔드 공고 1건을 찾았어요."
    assert first[-1][1]["calls"] == ["job_postings"]
    again = await _turn(http_client, sid, "판교 백엔드 공고 찾아줘")
    assert dict(again)["tool_result"]["cached"] is True


async def test_a_hanging_backend_tool_ends_the_turn_with_a_clear_error(assistant):
    http_client, _ = assistant
    sid = await _session(http_client)
    events = await _turn(http_client, sid, "판교 백엔드 공고 느린 걸로 찾아줘")
    names = [e for e, _ in events]
    assert names[:2] == ["tool_call", "tool_result"] and names[-1] == "error" and set(names[2:-1]) == {"delta"}
    assert "0.5" in events[1][1]["error"]  # shown to the model once, which replies without tools
    assert "".join(d["text"] for e, d in events if e == "delta") == "공고 검색이 지금은 안 돼요."
    assert events[-1][1]["error"]["code"] == "tool_failed" and "0.5" in events[-1][1]["error"]["message"]


async def test_a_turn_offers_a_tool_once_then_the_model_replies_from_its_result(assistant):
    http_client, standin = assistant
    sid = await _session(http_client)
    before = len(standin.requests)
    events = await _turn(http_client, sid, "판교 백엔드 공고 계속 찾아줘")
    assert [e for e, _ in events].count("tool_call") == 1 and events[-1][0] == "done"
    assert events[-1][1]["calls"] == ["job_postings"]
    assert "".join(d["text"] for e, d in events if e == "delta") == "찾은 공고를 정리했어요."
    assert len(standin.requests) == before + 2  # the call, then the reply (job_postings no longer offered)
    assert '"job_postings"' not in json.dumps(standin.requests[-1]["response_format"])


async def test_bad_sessions_tools_and_collections_are_4xx(assistant):
    http_client, _ = assistant
    r = await http_client.post("/v1/assistant/sessions", json={"collections": ["career"], "tools": ["nope"]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "tools"
    r = await http_client.post("/v1/assistant/sessions", json={"collections": ["no-such-collection"]})
    assert r.status_code == 404
    r = await http_client.post("/v1/assistant/sessions/" + "0" * 32 + "/messages", json={"text": "안녕"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    r = await http_client.post("/v1/assistant/sessions", json={"tools": ["search"]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "collections"


async def test_a_date_task_chosen_for_a_message_without_a_date_is_refused_by_code_and_asked_again(assistant):
    http_client, standin = assistant
    sid = await _session(http_client, tools=["calendar_parse"])
    before = len(standin.requests)
    events = await _turn(http_client, sid, "코딩테스트는 보통 몇 분 동안 봐?")
    assert [e for e, _ in events] == ["tool_refused", "delta", "done"]
    assert events[0][1]["name"] == "calendar_parse"
    assert events[1][1]["text"] == "보통 두 시간 안팎이에요." and events[-1][1]["tool"] is None
    assert len(standin.requests) == before + 2  # the refused choice and the one asked again


async def test_a_question_the_model_answers_from_memory_is_searched_by_code(assistant):
    http_client, _ = assistant
    sid = await _session(http_client, tools=["search", "calendar_parse"])
    events = await _turn(http_client, sid, "코딩테스트는 보통 몇 분 동안 봐?")  # the model: "보통 두 시간 안팎이에요."
    assert [e for e, _ in events] == ["tool_refused", "tool_call", "tool_result", "answer", "done"]
    assert events[1][1] == {"name": "search", "arguments": {"query": "코딩테스트는 보통 몇 분 동안 봐?"}, "by": "code"}
    assert not events[3][1]["answerable"]  # the stand-in's documents do not hold it: refused, not made up


async def test_a_reference_date_off_the_calendar_is_400(assistant):
    http_client, _ = assistant
    r = await http_client.post("/v1/assistant/sessions",
                               json={"collections": ["career"], "reference_date": "2026-13-45"})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "reference_date"


async def test_a_session_keeps_its_time_zone_and_an_unknown_zone_is_400_naming_it(assistant):
    http_client, _ = assistant
    r = await http_client.post("/v1/assistant/sessions", json={"collections": ["career"], "timezone": "Mars/Olympus"})
    assert r.status_code == 400, r.text
    field = r.json()["error"]["fields"][0]
    assert field["field"] == "timezone" and "'Mars/Olympus' is not an IANA time zone" in field["description"]
    sid = await _session(http_client, timezone="Europe/Berlin")
    assert (await http_client.get(f"/v1/assistant/sessions/{sid}")).json()["timezone"] == "Europe/Berlin"
    default = await _session(http_client)
    assert (await http_client.get(f"/v1/assistant/sessions/{default}")).json()["timezone"] == "Asia/Seoul"


async def test_a_task_whose_text_the_model_wrote_is_refused_by_code(assistant):
    http_client, _ = assistant
    sid = await _session(http_client, tools=["search", "answer_feedback"])
    # 면접: a word of the documents (a question they are not about gets the model's reply)
    events = await _turn(http_client, sid, "면접 때 가져갈 텀블러는 몇 시간 동안 보온이 돼?")
    # Issue 79: the reasoning service grounds every argument first; the made-up `answer` is not the person's
    # words, so the call never reaches the gateway (which refused it here before, as `tool_refused`)
    assert [e for e, _ in events] == ["tool_call", "tool_result", "answer", "done"], events
    assert "answer_feedback" not in json.dumps(events)
    assert events[0][1]["name"] == "search" and events[0][1]["by"] == "code"


async def test_a_korean_turn_is_never_answered_in_another_script(assistant):
    """Issue 77: the assistant replied "You're welcome!" to "고마워!". The reply's first letters are held until
    their script is known: English is asked again once, never sent; English twice is replaced by code's line."""
    http, _standin = assistant
    sid = await _session(http)
    events = await _turn(http, sid, "고마워!")
    text = "".join(d["text"] for e, d in events if e == "delta")
    assert text == "천만에요! 면접 잘 보세요." and "welcome" not in json.dumps(events), events
    events = await _turn(http, sid, "정말 고마워요!")
    text = "".join(d["text"] for e, d in events if e == "delta")
    assert text == KOREAN_FALLBACK and "Thank" not in json.dumps(events, ensure_ascii=False), events


async def test_a_follow_up_on_a_tool_result_is_answered_from_the_session_and_one_it_does_not_hold_is_searched(
        assistant):
    """Issue 78: "방금 찾은 공고 회사 이름이 뭐였지?" right after `job_postings` answered was searched in the policy
    documents and refused. The tool's result is kept as the turn's evidence, shown to the model on the next
    turn as the tool result it was, and a reply it holds is kept (`answered_from: session`); a reply it
    does not hold (a number from memory) is still searched by code."""
    http_client, standin = assistant
    sid = await _session(http_client)
    await _turn(http_client, sid, "판교 백엔드 공고 찾아줘")
    events = await _turn(http_client, sid, "방금 찾은 공고 회사 이름이 뭐였지?")
    assert [e for e, _ in events] == ["delta", "done"], events
    assert events[0][1]["text"] == "한빛소프트웨어예요." and events[-1][1]["answered_from"] == "session"
    messages = standin.requests[-1]["messages"]
    shown = [m for m in messages if m["role"] == "tool" or "Result of the tool call" in (m.get("content") or "")]
    assert shown and "company: 한빛소프트웨어" in json.dumps(messages, ensure_ascii=False)
    events = await _turn(http_client, sid, "그 회사 자기계발비는 얼마야?")  # 150만 원 is in no result of the session
    assert [e for e, _ in events][:2] == ["tool_call", "tool_result"] and events[0][1]["by"] == "code"
    assert events[-1][1]["answered_from"] == "search"
    state = (await http_client.get(f"/v1/assistant/sessions/{sid}")).json()
    assert [t["answered_from"] for t in state["turns"]] == ["tool", "session", "search"]


async def test_a_question_the_documents_are_not_about_gets_the_models_reply(assistant):
    """Issue 78: "오늘 저녁 뭐 먹지?" was searched in the career documents and refused. No word of it is in
    any passage the search finds: the model's reply stands, with no tool call."""
    http_client, _ = assistant
    sid = await _session(http_client)
    events = await _turn(http_client, sid, "오늘 저녁 뭐 먹지?")
    assert [e for e, _ in events] == ["delta", "done"], events
    assert events[0][1]["text"] == "따뜻한 국물 요리는 어때요?" and events[-1][1]["answered_from"] == "model"
    assert events[-1][1]["session_check"] == "no_evidence"  # nothing held: checked, then the documents asked


async def test_a_call_that_breaks_its_schema_twice_is_asked_again_without_the_tasks(assistant):
    """Issue 78: a `resume_analysis` call written in Han characters twice ended the turn with an error."""
    http_client, _ = assistant
    sid = await _session(http_client, tools=["search", "resume_analysis"])
    events = await _turn(http_client, sid, "코딩테스트에서 문제는 몇 개 나와?")
    names = [e for e, _ in events]
    assert "error" not in names and names[-1] == "done", events
    assert events[-1][1]["calls"] in (["search"], [])  # the reply asked again, then code's question rule
