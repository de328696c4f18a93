"""Every argument grounded in the person's words, whatever the tool (issue 79: services/reasoning/grounding.py).

The cases are the failure shapes the issue lists (copied names misspelt, a phone number's digits changed,
십오프로 read as 10, a password "전부 숫자로" with letters on, a pizza without a size), written with other
values than its held-out set's.
"""

from __future__ import annotations

import json
from datetime import date

from services.reasoning.grounding import ask_for, ground

TAXI = {"type": "object", "required": ["destination"], "additionalProperties": False,
        "properties": {"origin": {"type": "string", "description": "출발지"},
                       "destination": {"type": "string", "description": "도착지"},
                       "car_type": {"type": "string", "enum": ["일반", "모범", "대형"]}}}
SMS = {"type": "object", "required": ["phone", "message"],
       "properties": {"phone": {"type": "string", "description": "받는 사람 전화번호"},
                      "message": {"type": "string", "description": "보낼 내용"}}}
PIZZA = {"type": "object", "required": ["menu", "size"],
         "properties": {"menu": {"type": "string", "description": "피자 메뉴"},
                        "size": {"type": "string", "enum": ["R", "L"], "description": "피자 크기"},
                        "quantity": {"type": "integer", "description": "판 수"}}}
PASSWORD = {"type": "object", "required": ["length"],
            "properties": {"length": {"type": "integer", "description": "비밀번호 길이"},
                           "use_uppercase": {"type": "boolean", "description": "대문자 포함"},
                           "use_digits": {"type": "boolean", "description": "숫자 포함"}}}
UPPER = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "description": "문자열"}}}


def test_a_near_copy_is_put_back_in_the_persons_spelling_with_the_stretch_as_proof():
    g = ground("call_taxi", "택시를 부른다", {"destination": "송정해변로", "origin": "해운대"}, TAXI,
               "송정해번로까지 택시 좀")
    assert g.outcome == "call" and g.arguments == {"destination": "송정해번로"}  # the person's spelling, as written
    assert g.snapped == {"destination": "송정해번로"} and g.dropped == ["origin"]  # 해운대: nobody said it
    g = ground("send_sms", "문자를 보낸다", {"phone": "010-5512-7789", "message": "조금 늦어"}, SMS,
               "010-5521-7789로 조금 늦어 라고 보내 줘")
    assert g.arguments["phone"] == "010-5521-7789"


def test_a_number_is_one_the_person_wrote_read_by_the_korean_reader():
    coupon = {"type": "object", "required": ["rate"],
              "properties": {"rate": {"type": "integer", "description": "할인율"}}}
    assert ground("discount", "할인", {"rate": 25}, coupon, "이십오프로 깎아 줘").arguments == {"rate": 25}
    g = ground("discount", "할인", {"rate": 20}, coupon, "이십오프로 깎아 줘")
    assert g.arguments == {"rate": 25} and g.snapped == {"rate": "25"}  # the one number written
    g = ground("order_pizza", "피자 주문", {"menu": "불고기", "size": "L", "quantity": 3}, PIZZA,
               "불고기 피자 L로 세 판")
    assert g.arguments == {"menu": "불고기", "size": "L", "quantity": 3}  # 세 판: a native numeral


def test_a_flag_set_on_needs_a_word_of_it_else_its_default():
    g = ground("generate_password", "비밀번호 생성", {"length": 12, "use_uppercase": True, "use_digits": True},
               PASSWORD, "12자리 비밀번호, 전부 숫자로")
    assert g.arguments == {"length": 12, "use_digits": True} and g.dropped == ["use_uppercase"]


def test_a_missing_required_value_is_asked_for_by_its_description():
    g = ground("order_pizza", "피자 주문", {"menu": "불고기", "size": "R"}, PIZZA, "불고기 피자 하나 시켜 줘")
    assert g.outcome == "ask" and g.missing == ["size"]
    assert ask_for(g.missing, PIZZA) == "피자 크기(R, L 중)를 알려 주세요."
    g = ground("call_taxi", "택시를 부른다", {"destination": "서울역"}, TAXI, "택시 한 대 불러 줘")
    assert g.outcome == "ask" and ask_for(g.missing, TAXI) == "도착지를 알려 주세요."


def test_a_tool_that_shares_nothing_with_the_request_and_gets_no_value_is_declined():
    g = ground("count_uppercase", "문자열의 대문자 개수를 센다", {"text": "항공권 검색"}, UPPER,
               "다음 주 제주 가는 비행기 찾아 줘")
    assert g.outcome == "decline"


def test_a_derived_value_and_a_long_free_text_stand():
    event = {"type": "object", "required": ["date", "memo"],
             "properties": {"date": {"type": "string", "format": "date"},
                            "memo": {"type": "string", "description": "메모"}}}
    g = ground("add", "일정을 추가한다", {"date": "2026-12-09", "memo": "치과 예약 잊지 말기"}, event,
               "수요일에 치과 예약 잊지 말라고 메모해 줘")
    assert g.outcome == "call" and g.arguments["date"] == "2026-12-09"


def test_the_answer_to_the_question_code_asked_completes_the_call_the_earlier_message_began():
    """Build item 2: "불고기 피자 주문해줘" is asked its size; "라지요" answers it. The call the model writes
    then holds the menu from the first message and the size from the second: both are the person's words."""
    from services.reasoning.completions import Plan, ToolSpec, tool_choice_schema

    tools = {"order_pizza": ToolSpec("order_pizza", "피자 주문", {**PIZZA, "properties": {
        **PIZZA["properties"], "size": {"type": "string", "enum": ["레귤러", "라지"], "description": "피자 크기"}}})}

    def plan(said: list[str]) -> Plan:
        p = Plan([{"role": "user", "content": said[-1]}], tools=tools, tool_mode="auto", user_text=said[-1],
                 said="\n".join(said), today=date(2026, 12, 7))
        p.schema = tool_choice_schema(tools, "auto", None)
        return p

    call = '{"tool": "order_pizza", "arguments": {"menu": "불고기 피자", "size": "라지"}}'
    first = plan(["불고기 피자 주문해줘"]).decode(call)
    assert first.content == "피자 크기(레귤러, 라지 중)를 알려 주세요." and not first.tool_calls
    second = plan(["불고기 피자 주문해줘", "라지요"]).decode(call)
    assert second.tool_calls and json.loads(second.tool_calls[0].arguments) == {"menu": "불고기 피자", "size": "라지"}


def test_relatedness_is_read_on_lemmas_and_decides_only_between_asking_and_declining():
    """"세탁기 돌려 줘" shares no lemma with a light tool (돌리 is not its verb); 꺼 and 끈다 share 끄. A call whose
    values are all the person's is not declined on words: paraphrases ("오늘 서울에 비 와?" for a weather
    tool) share none either (bench/results/llm_api_tools.md)."""
    from services.reasoning.grounding import related

    light_text = "set_light 방 조명을 켜거나 끈다 room 방 이름 on 켜기(true) 끄기(false)"
    assert related(light_text, "세탁기 돌려 줘", "세탁기") is False
    assert related(light_text, "안방 불 좀 꺼 줘", "안방") is True
    weather = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
    assert ground("get_weather", "도시의 날씨 예보를 조회한다", {"city": "서울"}, weather,
                  "오늘 서울에 비 와?").outcome == "call"
    light = {"type": "object", "required": ["room", "on"],
             "properties": {"room": {"type": "string", "description": "방 이름"},
                            "on": {"type": "boolean", "description": "켜기(true) 끄기(false)"}}}
    assert ground("set_light", "방 조명을 켜거나 끈다", {"room": "세탁기"}, light,
                  "세탁기 돌려 줘").outcome == "decline"  # `on` missing and nothing shared: declined
    assert ground("set_light", "방 조명을 켜거나 끈다", {"room": "안방", "on": False}, light,
                  "안방 불 좀 꺼 줘").outcome == "call"
    on = ground("set_light", "방 조명을 켜거나 끈다", {"room": "주방", "on": True}, light, "주방 불 켜 줘")
    assert on.outcome == "call" and on.arguments["on"] is True  # 켜 and 켜기(true): one verb (found on the report)
    english = ground("count_upper", "Count the upper-case letters", {},
                     {**UPPER, "properties": {"text": {"type": "string", "description": "the text"}}},
                     "100초 타이머 맞춰 줘")
    assert english.outcome == "decline"  # an English description: nothing given and no word shared


def test_a_long_number_keeps_the_persons_digits_and_grouping_and_a_message_loses_words_never_said():
    account = {"type": "object", "required": ["account"], "properties": {"account": {"type": "string",
                                                                                     "description": "계좌 번호"}}}
    g = ground("transfer", "계좌로 이체한다", {"account": "301-234-56789"}, account, "301-23-456789로 이체해 줘")
    assert g.arguments == {"account": "301-23-456789"} and g.snapped == {"account": "301-23-456789"}
    g = ground("transfer", "계좌로 이체한다", {"account": "301-23-45678"}, account, "301-23-456789로 이체해 줘")
    assert g.arguments == {"account": "301-23-456789"}  # a digit dropped: put back
    g = ground("send_sms", "문자를 보낸다", {"phone": "010-3344-5566", "message": "지금 출발해 라고 전해줘"}, SMS,
               "010-3344-5566로 지금 출발해 라고 문자 보내")
    assert g.arguments["message"] == "지금 출발해" and g.outcome == "call"


def test_a_request_to_act_one_tool_serves_answered_without_it_is_asked_its_values():
    """"택시 좀 불러 줘" answered "죄송합니다, 도와드릴 수 없습니다." while a taxi tool is offered: code asks
    for the tool's required values instead. A message that names a value (a number, a noun the tool does
    not name), asks a question, or fits no tool or two alike keeps the model's reply."""
    from services.reasoning.grounding import ask_instead

    taxi = ("call_taxi", "택시를 부른다", TAXI)
    sms = ("send_sms", "문자를 보낸다", SMS)
    assert ask_instead([taxi, sms], "택시 좀 불러 줘") == "도착지를 알려 주세요."
    assert ask_instead([taxi, sms], "민수한테 문자 하나 보내 줘") is None  # 민수: a value the model should use
    assert ask_instead([taxi, sms], "010-2233-4455로 문자 보내 줘") is None
    assert ask_instead([taxi, sms], "택시 요금은 얼마야?") is None  # a question, not a request to act
    assert ask_instead([taxi, sms], "세탁기 돌려 줘") is None  # no tool does it
    assert ask_instead([sms, ("send_mms", "문자를 보낸다", SMS)], "문자 좀 보내 줘") is None  # two alike


def test_a_duration_converted_to_the_unit_the_tool_asks_is_derived_not_snapped():
    timer = {"type": "object", "required": ["seconds"],
             "properties": {"seconds": {"type": "integer", "description": "타이머 길이(초)"}}}
    g = ground("start_timer", "타이머를 시작한다", {"seconds": 300}, timer, "5분 타이머 켜 줘")
    assert g.outcome == "call" and g.arguments == {"seconds": 300} and not g.snapped
    g = ground("start_timer", "타이머를 시작한다", {"seconds": 30}, timer, "5분 타이머 켜 줘")
    assert g.outcome == "ask" and g.missing == ["seconds"]  # 30 is no reading of 5분, and 5 or 300: no proof


def test_a_reply_drawn_from_an_earlier_tool_result_is_never_replaced_by_a_question():
    """The assistant's B2 run: "찾은 공고 근무지 다시 말해줘" is answered from the postings already found."""
    from services.reasoning.completions import Plan, ToolSpec, tool_choice_schema

    tools = {"call_taxi": ToolSpec("call_taxi", "택시를 부른다", TAXI)}
    reply = '{"tool": "reply_directly", "answer": "서면역으로 불렀어요."}'
    first = [{"role": "user", "content": "택시 좀 불러 줘"}]
    later = [{"role": "user", "content": "서면역까지 택시 불러 줘"},
             {"role": "user", "content": 'Result of the tool call call_1 (call_taxi):\n{"ok": true}'},
             {"role": "user", "content": "택시 좀 불러 줘"}]
    for messages, want in ((first, "도착지를 알려 주세요."), (later, "서면역으로 불렀어요.")):
        p = Plan(messages, tools=tools, tool_mode="auto", user_text="택시 좀 불러 줘", today=date(2026, 12, 7))
        p.schema = tool_choice_schema(tools, "auto", None)
        assert p.decode(reply).content == want


def test_a_number_of_a_date_or_a_clock_time_counts_only_for_a_parameter_of_time():
    """The report split gave people=12 for "12월 12일 저녁 7시 4명": any number written was taken."""
    booking = {"type": "object", "required": ["restaurant", "date", "people"],
               "properties": {"restaurant": {"type": "string", "description": "식당 이름"},
                              "date": {"type": "string", "format": "date", "description": "예약 날짜"},
                              "people": {"type": "integer", "description": "인원 수"}}}
    words = "바다식당에 12월 12일 저녁 7시 4명 예약해 줘"
    g = ground("reserve", "식당 예약", {"restaurant": "바다식당", "date": "2026-12-12", "people": 12}, booking, words)
    assert g.outcome == "call" and g.arguments["people"] == 4 and g.snapped == {"people": "4"}
    g = ground("reserve", "식당 예약", {"restaurant": "바다식당", "date": "2026-12-12", "people": 7}, booking,
               "바다식당에 12월 12일 저녁 7시 예약해 줘")
    assert g.outcome == "ask" and g.missing == ["people"]  # no number of people was said
    bike = {"type": "object", "required": ["hours"],
            "properties": {"hours": {"type": "integer", "description": "대여 시간(시간 단위)"}}}
    assert ground("rent_bike", "자전거 대여", {"hours": 3}, bike, "3시간 빌려 줘").arguments == {"hours": 3}


def test_a_value_said_once_fills_one_required_parameter():
    """The report2 split called search_flights(origin="부산", destination="부산") for "내일 부산 날씨 알려 줘"."""
    flights = {"type": "object", "required": ["origin", "destination", "date"],
               "properties": {"origin": {"type": "string", "description": "출발 도시"},
                              "destination": {"type": "string", "description": "도착 도시"},
                              "date": {"type": "string", "format": "date", "description": "출발 날짜"}}}
    g = ground("search_flights", "항공권을 검색한다", {"origin": "부산", "destination": "부산", "date": "2026-12-08"},
               flights, "내일 부산 날씨 알려 줘")
    assert g.outcome != "call" and g.missing == ["destination"]
    g = ground("search_flights", "항공권을 검색한다", {"origin": "부산", "destination": "제주", "date": "2026-12-08"},
               flights, "내일 부산에서 제주 가는 항공권")
    assert g.outcome == "call"
