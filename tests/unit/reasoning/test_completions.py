"""Completions: tool choices and response formats decoded under a schema, validated, regenerated once.

Decoding is checked on plain strings; the regeneration on a scripted OpenAI-compatible stand-in
(bench/standin.py), since a real model cannot be made to break its schema on demand.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from bench.standin import ChatStandIn
from services.reasoning.backends.base import GenerationParams
from services.reasoning.backends.openai_http import OpenAIBackend
from services.reasoning.completer import Completer, ToolCalls
from services.reasoning.completions import (
    MessageIn,
    Plan,
    ToolCallIn,
    ToolSpec,
    backend_messages,
    tool_choice_schema,
)
from services.reasoning.generation import Delta, Failed, Finished, Generator, PriceTable, Timeouts
from services.reasoning.schema_checks import AnswerInvalid, check_schema

WEATHER = ToolSpec("get_weather", "도시의 현재 날씨", {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"], "additionalProperties": False})
BOOKS = ToolSpec("search_books", "도서 검색", {
    "type": "object", "properties": {"query": {"type": "string", "minLength": 1}, "limit": {"type": "integer",
                                                                                            "minimum": 1}},
    "required": ["query"]})
TOOLS = {t.name: t for t in (WEATHER, BOOKS)}


def plan(mode="auto", tools=TOOLS, answer_schema=None) -> Plan:
    p = Plan([{"role": "user", "content": "질문"}], tools=tools, tool_mode=mode, answer_schema=answer_schema)
    p.schema = tool_choice_schema(tools, mode, answer_schema) if p.decodes_tools else answer_schema
    return p


def test_the_auto_schema_admits_each_tool_with_its_arguments_or_an_answer_and_nothing_else():
    schema = tool_choice_schema(TOOLS, "auto", None)
    ok = [{"tool": "get_weather", "arguments": {"city": "서울"}}, {"tool": "reply_directly", "answer": "안녕하세요"},
          {"tool": "search_books", "arguments": {"query": "파이썬", "limit": 3}}]
    bad = [{"tool": "get_weather", "arguments": {}}, {"tool": "delete_all", "arguments": {}},
           {"tool": "get_weather", "arguments": {"city": "서울", "unit": "k"}}, {"answer": 3}, {"other": 1},
           {"answer": "도구 없이"}, {"tool": "reply_directly", "arguments": {}}]
    for value in ok:
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)
    assert {"answer": "x"} not in [b.get("properties") for b in tool_choice_schema(TOOLS, "required", None)["anyOf"]]
    assert tool_choice_schema({"get_weather": WEATHER}, "named", None)["properties"]["tool"] == {"const": "get_weather"}


def test_the_reply_is_one_more_choice_among_the_tools_and_decodes_to_text():
    assert plan().decode('{"tool": "reply_directly", "answer": "안녕하세요"}').content == "안녕하세요"
    listed = backend_messages([MessageIn("user", "안녕")], TOOLS, "auto")[0]["content"]
    assert "- reply_directly{answer: string}: " in listed
    taken = {**TOOLS, "reply_directly": WEATHER}  # a caller's own tool of that name: the plain answer form
    assert {"answer": "네"} in [{"answer": "네"} for b in tool_choice_schema(taken, "auto", None)["anyOf"]
                               if b["required"] == ["answer"]]


def test_a_tool_call_decodes_to_an_id_a_name_and_arguments_as_json_text():
    decoded = plan().decode('{"tool": "get_weather", "arguments": {"city": "부산", "unit": "c"}}')
    (call,) = decoded.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "부산", "unit": "c"}
    assert call.id.startswith("call_") and len(call.id) > 10 and decoded.content == ""
    assert plan().decode('{"answer": "도구 없이 답합니다"}').content == "도구 없이 답합니다"


@pytest.mark.parametrize("text,mode,why", [
    ('{"tool": "get_weather", "arguments": {"town": "부산"}}', "auto", "arguments of get_weather"),
    ('{"tool": "drop_table", "arguments": {}}', "auto", "not one of"),
    ('{"answer": "답"}', "required", "neither"),
    ('{"tool": "get_weather", "arguments": {"city": "부산"}', "auto", "not JSON"),
    ('["get_weather"]', "auto", "not a JSON object"),
])
def test_an_answer_that_breaks_the_choice_is_invalid_naming_why(text, mode, why):
    with pytest.raises(AnswerInvalid, match=why):
        plan(mode).decode(text)


def test_an_answer_under_a_response_format_is_validated_and_returned_as_json_text():
    schema = {"type": "object", "properties": {"score": {"type": "integer", "maximum": 100}}, "required": ["score"]}
    assert json.loads(plan(answer_schema=schema).decode('{"answer": {"score": 90}}').content) == {"score": 90}
    with pytest.raises(AnswerInvalid, match="maximum"):
        plan(answer_schema=schema).decode('{"answer": {"score": 190}}')
    no_tools = plan(mode="none", tools={}, answer_schema=schema)
    assert no_tools.decode('{"score": 7}').content == '{"score": 7}'
    with pytest.raises(AnswerInvalid):
        no_tools.decode('{"score": "칠"}')


def test_tool_history_is_written_for_any_chat_template():
    messages = [MessageIn("system", "친절한 도우미"), MessageIn("user", "서울 날씨?"),
                MessageIn("assistant", "", (ToolCallIn("call_1", "get_weather", '{"city": "서울"}'),)),
                MessageIn("tool", "맑음, 21도", tool_call_id="call_1"),
                MessageIn("tool", "습도 40%", tool_call_id="call_1")]
    out = backend_messages(messages, TOOLS, "auto")
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("친절한 도우미") and "- search_books{" in out[0]["content"]
    assert json.loads(out[2]["content"]) == {"tool": "get_weather", "arguments": {"city": "서울"}}
    assert "call_1 (get_weather)" in out[3]["content"] and "맑음, 21도" in out[3]["content"]
    assert "습도 40%" in out[3]["content"]  # two results in a row joined into one turn
    assert all("tool" not in m["content"].lower() for m in backend_messages(messages[:2], {}, "none"))


@pytest.fixture
def completer_for():
    made = []

    def make(answers: list[str]):
        standin = ChatStandIn([{"chunks": [a]} for a in answers])
        generator = Generator([OpenAIBackend("standin", standin.url, "m", schema_format="json_object")],
                              Timeouts(), PriceTable())
        made.append(standin)
        return standin, Completer(generator)

    yield make
    for standin in made:
        standin.close()


async def events(completer: Completer, p: Plan, buffered: bool) -> list:
    return [e async for e in completer.run(p, GenerationParams(64, 0.0), Timeouts(), buffered=buffered)]


async def test_a_broken_tool_call_is_regenerated_once_naming_the_violation(completer_for):
    standin, completer = completer_for(['{"tool": "get_weather", "arguments": {"town": "서울"}}',
                                        '{"tool": "get_weather", "arguments": {"city": "서울"}}'])
    out = await events(completer, plan(), buffered=False)
    assert isinstance(out[0], ToolCalls) and json.loads(out[0].calls[0].arguments) == {"city": "서울"}
    assert isinstance(out[-1], Finished) and out[-1].finish_reason == "tool_calls" and out[-1].usage.llm_calls == 2
    retry = standin.requests[1]["messages"]
    assert "not valid" in retry[-1]["content"] and "city" in retry[-1]["content"]
    assert standin.requests[0]["response_format"]["schema"]["anyOf"]  # the backend was held to the choice


async def test_a_tool_call_broken_twice_fails_as_a_schema_violation_and_is_never_returned(completer_for):
    _, completer = completer_for(['{"tool": "get_weather", "arguments": {}}'])
    out = await events(completer, plan("required"), buffered=False)
    assert len(out) == 1 and isinstance(out[0], Failed) and out[0].kind == "schema_violation"
    assert out[0].usage.llm_calls == 2


async def test_a_streamed_format_is_not_retried_and_a_buffered_one_is(completer_for):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    p = plan("none", {}, schema)
    _, streamed = completer_for(['{"n": "하나"}', '{"n": 1}'])
    out = await events(streamed, p, buffered=False)
    assert isinstance(out[0], Delta) and isinstance(out[-1], Failed) and out[-1].usage.llm_calls == 1
    _, held = completer_for(['{"n": "하나"}', '{"n": 1}'])
    out = await events(held, p, buffered=True)
    assert [type(e) for e in out] == [Delta, Finished] and out[0].text == '{"n": 1}' and out[1].usage.llm_calls == 2


@pytest.mark.parametrize("raw,why", [
    ('{"type": "number", "maximum": NaN}', "NaN is not a JSON number"),
    ('{"type": "number", "minimum": -Infinity}', "-Infinity is not a JSON number"),
    ('{"type": "object", "properties": {"\\ud800": {}}}', "lone surrogate"),
    ('[1, 2]', "a schema must be a JSON object"),
    ('{"type": 5}', "not a valid JSON schema"),
    ("[" * 10_000 + "]" * 10_000, "not a valid JSON schema"),
])
def test_a_schema_no_backend_could_be_sent_is_a_violation_naming_the_field(raw, why):
    violations = []
    assert check_schema(raw, "tools[0].parameters", violations) is None
    assert violations[0].field == "tools[0].parameters" and why in violations[0].description


def test_grammar_bounds_name_every_place_a_schema_passes_them():
    from services.reasoning.schema_checks import MAX_ENUM, grammar_violations

    schema = {"type": "object", "properties": {
        "city": {"enum": [str(i) for i in range(MAX_ENUM + 1)]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10**6}, "minItems": 5000},
        "fine": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 10}}}
    got = {v.field for v in grammar_violations(schema, "response_format.json_schema")}
    assert got == {"response_format.json_schema.properties.city.enum",
                   "response_format.json_schema.properties.tags.minItems",
                   "response_format.json_schema.properties.tags.items.maxLength"}
    assert grammar_violations({"type": "object", "properties": {"a": {"type": "string", "maxLength": 200}}}, "s") == []


def test_a_backends_refusal_is_told_from_its_being_unwell():
    from services.reasoning.backends.openai_http import rejected

    assert rejected(400, "bad schema") and rejected(422, "") and rejected(500, "Failed to initialize samplers")
    assert not rejected(429, "") and not rejected(408, "") and not rejected(503, "loading model")
    assert not rejected(500, "internal error")


def test_today_is_the_zones_unless_the_callers_system_message_names_it():
    from datetime import date, datetime
    from zoneinfo import ZoneInfo

    from services.reasoning.complete_request import reference_date

    said = [MessageIn("system", "너는 비서야. 오늘은 2025-03-01이야."), MessageIn("user", "내일 회의 잡아 줘")]
    assert reference_date(said, "Asia/Seoul") == date(2025, 3, 1)
    assert reference_date(said[1:], "Asia/Seoul") == datetime.now(ZoneInfo("Asia/Seoul")).date()
    listed = backend_messages(said, TOOLS, "auto", date(2025, 3, 1), "Asia/Seoul")[0]["content"]
    assert listed.startswith("너는 비서야.") and "Today is 2025-03-01 (Saturday, Asia/Seoul)" in listed


async def test_a_call_none_of_whose_required_arguments_the_user_gave_is_answered_directly(completer_for):
    from datetime import date

    standin, completer = completer_for(['{"tool": "get_weather", "arguments": {"city": "Seoul"}}',
                                        '{"tool": "reply_directly", "answer": "반가워요! 저는 잘 지내요."}'])
    p = plan()
    p.user_text, p.today = "안녕! 오늘 하루 어땠어?", date(2026, 12, 5)
    out = await events(completer, p, buffered=False)
    assert not any(isinstance(e, ToolCalls) for e in out)
    assert isinstance(out[-1], Finished) and out[-1].text == "반가워요! 저는 잘 지내요."
    assert standin.requests[1]["response_format"]["schema"]["properties"]["tool"] == {"const": "reply_directly"}
    assert "No tool fits" in standin.requests[1]["messages"][-1]["content"]


def test_grounding_and_the_values_code_reads():
    from datetime import date

    from services.reasoning.arguments import correct, grounded

    today = date(2026, 12, 5)
    weather = TOOLS["get_weather"].parameters
    assert not grounded({"city": "Seoul"}, weather, "안녕! 오늘 하루 어땠어?", today)
    assert grounded({"city": "부산"}, weather, "부산 날씨 어때?", today)
    gift = {"type": "object", "required": ["recipient", "budget_krw"], "properties": {
        "recipient": {"type": "string"}, "budget_krw": {"type": "integer"}}}
    assert grounded({"recipient": "친구", "budget_krw": 10000}, gift, "만 원짜리 교환용 선물", today)
    assert not grounded({"recipient": "친구", "budget_krw": 50000}, gift, "면접에서 약점을 물으면?", today)
    assert correct({"recipient": "동료", "budget_krw": 50000}, gift, "2만5천원 정도로 동료 선물", today)[
        "budget_krw"] == 25000, "the only amount written, the only money parameter"
    event = {"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}}}
    assert correct({"time": "23:11"}, event, "12월 31일 밤 11시에 일정", today) == {"time": "23:00"}


async def test_a_direct_reply_cut_at_max_tokens_is_returned_cut_not_failed():
    standin = ChatStandIn([{"chunks": ['{"tool": "reply_directly", "answer": "도커는 컨테이너를', ' 돌리고'],
                            "finish_reason": "length"}])
    try:
        generator = Generator([OpenAIBackend("standin", standin.url, "m", schema_format="json_object")],
                              Timeouts(), PriceTable())
        out = await events(Completer(generator), plan(), buffered=False)
    finally:
        standin.close()
    assert isinstance(out[-1], Finished) and out[-1].finish_reason == "length"
    assert out[-1].text == "도커는 컨테이너를 돌리고" and out[-1].usage.llm_calls == 1


def test_a_required_date_or_amount_the_user_never_wrote_makes_the_call_ungrounded():
    from datetime import date

    from services.reasoning.arguments import grounded

    event = {"type": "object", "required": ["title", "date"], "properties": {
        "title": {"type": "string"}, "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                                              "description": "YYYY-MM-DD"}}}
    today = date(2026, 12, 5)
    question = "이력서 첫 문장 다듬어 줘: 저는 개발자입니다"
    assert not grounded({"title": "개발자 소개", "date": "2026-12-05"}, event, question, today)
    assert grounded({"title": "치과 예약", "date": "2026-12-20"}, event, "12월 20일에 치과 예약 일정 넣어 줘", today)
    gift = {"type": "object", "required": ["recipient", "budget_krw"], "properties": {
        "recipient": {"type": "string"}, "budget_krw": {"type": "integer"}}}
    assert not grounded({"recipient": "엄마", "budget_krw": 50000}, gift, "엄마 선물 추천해 줘", today)


async def test_a_direct_reply_streams_as_it_is_written_unless_the_call_is_buffered(completer_for):
    chunks = ['{"tool": "reply', '_directly", "answer": "안녕', '하세요! \\"반가워요\\"', '"}']
    standin = ChatStandIn([{"chunks": chunks}])
    try:
        completer = Completer(Generator([OpenAIBackend("standin", standin.url, "m", schema_format="json_object")],
                                        Timeouts(), PriceTable()))
        streamed = await events(completer, plan(), buffered=False)
        held = await events(completer, plan(), buffered=True)
    finally:
        standin.close()
    assert [e.text for e in streamed if isinstance(e, Delta)] == ["안녕", '하세요! "반가워요"']
    assert isinstance(streamed[-1], Finished) and streamed[-1].text == '안녕하세요! "반가워요"'
    assert [e.text for e in held if isinstance(e, Delta)] == ['안녕하세요! "반가워요"']  # one delta, once validated
    _, calls = completer_for(['{"tool": "get_weather", "arguments": {"city": "서울"}}'])
    assert not [e for e in await events(calls, plan(), buffered=False) if isinstance(e, Delta)]


def test_a_word_in_a_script_the_user_did_not_write_is_put_back_or_refused():
    """Issue 77: a tool call's title "한빛소프트 면接" (the user wrote 면접) passed every argument check."""
    from datetime import date

    cal = ToolSpec("add_event", "일정 추가", {"type": "object", "properties": {"title": {"type": "string"}},
                                              "required": ["title"]})
    p = plan(tools={"add_event": cal})
    p.user_text, p.today = "한빛소프트 면접 일정 넣어 줘", date(2026, 12, 7)
    with pytest.raises(AnswerInvalid, match="did not write"):  # a whole word in hanja: no proof of the spelling
        p.decode('{"tool": "add_event", "arguments": {"title": "한빛소프트 面接"}}')
    decoded = p.decode('{"tool": "add_event", "arguments": {"title": "한빛소프트 면接"}}')
    assert json.loads(decoded.tool_calls[0].arguments) == {"title": "한빛소프트 면접"}  # the user's spelling
    with pytest.raises(AnswerInvalid, match="did not write"):
        p.decode('{"tool": "add_event", "arguments": {"title": "한빛 會議"}}')  # no stretch of the user's words
    p.user_text = "金민서 님과 면담"
    kept = p.decode('{"tool": "add_event", "arguments": {"title": "金민서 면담"}}')
    assert json.loads(kept.tool_calls[0].arguments) == {"title": "金민서 면담"}  # the user's own hanja stand
