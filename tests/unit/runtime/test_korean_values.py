"""Korean amounts and dates read by code (services/runtime/korean), and tool arguments checked against them."""

from datetime import date

import pytest

from services.reasoning.arguments import correct
from services.runtime.korean.amounts import amounts, currencies
from services.runtime.korean.dates import scan

TODAY = date(2026, 12, 5)  # a Saturday


@pytest.mark.parametrize(("text", "value", "currency", "bound"), [
    ("5만 원 이하 선물 추천해 줘", 50_000, "KRW", "max"),
    ("1억 2천만 원짜리 아파트", 120_000_000, "KRW", None),
    ("예산은 12만5천원", 125_000, "KRW", None),
    ("3천원 정도", 3_000, "KRW", "about"),
    ("50,000원 넘는 책", 50_000, "KRW", "min"),
    ("1.5만원", 15_000, "KRW", None),
    ("만 원대 향수", 10_000, "KRW", "range"),
    ("$20 가방", 20, "USD", None),
    ("100유로를 달러로 바꾸면", 100, "EUR", None),
])
def test_amounts_as_korean_writes_them(text, value, currency, bound):
    found = amounts(text)
    assert [(a.value, a.currency, a.bound) for a in found] == [(value, currency, bound)]


def test_numbers_that_are_not_money_are_not_amounts():
    assert amounts("책 3권, 2026년, 5명") == []
    assert amounts("포트폴리오 조언해 줘, 천천히 만들어 볼게, 억지로") == [], "unit syllables inside words"


def test_currencies_named_and_the_one_converted_to():
    assert currencies("100유로를 달러로 바꾸면 얼마야") == (["EUR", "USD"], "USD")
    assert currencies("엔화로 50달러 환전") == (["JPY", "USD"], "JPY")
    assert currencies("원하는 엔진이 불가능") == ([], None)


def test_dates_resolve_against_the_reference_date():
    assert scan("12월 15일 오후 3시", TODAY)[0].start.day == date(2026, 12, 15)
    assert scan("다음 주 화요일", TODAY)[0].start.day == date(2026, 12, 8)
    assert scan("내일", TODAY)[0].start.day == date(2026, 12, 6)
    assert scan("1월 3일", TODAY)[0].start.day == date(2027, 1, 3), "a date without a year is the coming one"


GIFTS = {"type": "object", "properties": {
    "query": {"type": "string"}, "max_price": {"type": "integer", "description": "최대 가격(원)"},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 20}}, "required": ["query"]}
FX = {"type": "object", "properties": {"amount": {"type": "number"},
                                       "from_currency": {"type": "string", "enum": ["KRW", "USD", "EUR", "JPY"]},
                                       "to_currency": {"type": "string", "enum": ["KRW", "USD", "EUR", "JPY"]}}}
CAL = {"type": "object", "properties": {"title": {"type": "string"}, "date": {"type": "string", "format": "date"}}}


def test_an_amount_read_ten_times_too_small_is_put_right_and_a_count_is_left_alone():
    got = correct({"query": "선물", "max_price": 5000, "max_results": 5}, GIFTS, "5만 원 이하 선물 5개", TODAY)
    assert got == {"query": "선물", "max_price": 50000, "max_results": 5}
    assert correct({"query": "선물", "max_price": 5}, GIFTS, "5만 원 이하 선물", TODAY)["max_price"] == 50000
    same = {"query": "선물", "max_price": 50000}
    assert correct(same, GIFTS, "5만 원 이하 선물", TODAY) is same


def test_currencies_follow_the_users_words():
    got = correct({"amount": 100, "from_currency": "KRW", "to_currency": "USD"}, FX, "100유로를 달러로 바꾸면?",
                  TODAY)
    assert got == {"amount": 100, "from_currency": "EUR", "to_currency": "USD"}


def test_a_date_in_the_wrong_year_takes_the_date_the_phrase_names():
    got = correct({"title": "면접", "date": "2023-12-15"}, CAL, "12월 15일에 면접 일정 넣어 줘", TODAY)
    assert got["date"] == "2026-12-15"
    got = correct({"title": "회의", "date": "2023-05-02"}, CAL, "다음 주 화요일 회의", TODAY)
    assert got["date"] == "2026-12-08"
    assert correct({"title": "x", "date": "2026-12-15"}, CAL, "12월 15일", TODAY)["date"] == "2026-12-15"


def test_a_correction_the_schema_refuses_is_not_made():
    tight = {"type": "object", "properties": {"price": {"type": "integer", "maximum": 10000}}}
    assert correct({"price": 5000}, tight, "5만 원짜리", TODAY) == {"price": 5000}


def test_a_message_asks_when_a_sentence_ends_as_a_question_or_it_asks_to_be_told():
    from services.runtime.korean.questions import asks
    for text in ("연차는 며칠이야?", "입사 후 교육 기간이 얼마나 되나요", "복지 제도를 알려 주세요",
                 "면접 복장은 어떻게 하면 좋을까", "수습 기간이 있는 회사인가요.", "야근 수당이 궁금해요",
                 "오늘 너무 떨려요. 첫 면접에서 뭘 물어볼까요", "연봉 협상 요령 좀 알려 줄래?",
                 "한빛소프트웨어 자기계발비 얼마 줘?", "교통비는 한 달에 얼마나 줘요?", "명절 상여금은 몇 % 줘?"):
        assert asks(text), text
    for text in ("안녕하세요! 반가워요", "다음 주 월요일 오전 10시 면접 일정 등록해 줘", "이력서 좀 봐 주세요",
                 "고마워요. 덕분에 마음이 놓이네요", "내일 면접 보러 가요", "합격했습니다!",
                 "자기소개서 첨삭 좀 해 줄래요?", "모의 면접 같이 해 줄 수 있어?",
                 "좋네, 알려줘서 고마워", "설명해 줘서 이해가 잘 됐어요",  # …줘서: a reason, not a request
                 "어디 있는지 찾아 줘?", "면접 일정 언제로 등록해 줘?"):  # 줘 after -아/-어: a request to act
        assert not asks(text), text


ALARM = {"type": "object", "properties": {"label": {"type": "string"}, "date": {"type": "string", "format": "date"},
                                          "time": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}}}


def test_the_nights_one_oclock_is_after_midnight_and_the_models_reading_stands():
    """Issue 77: 밤 1시 was read 13:00, and code replaced the model's right 01:00 because a meridiem word was there."""
    said = "오늘 밤 1시에 알림 맞춰 줘"
    kept = {"label": "알림", "date": "2026-12-06", "time": "01:00"}
    assert correct(kept, ALARM, said, TODAY) == kept  # the night after the 5th: the 6th, 01:00
    assert correct({**kept, "date": "2026-12-05"}, ALARM, said, TODAY)["date"] == "2026-12-05"  # "오늘" as written
    assert correct({**kept, "time": "13:00"}, ALARM, said, TODAY)["time"] == "01:00"  # replaced, with proof
    assert correct({**kept, "time": "23:00"}, ALARM, "오늘 밤 11시 알림", TODAY)["time"] == "23:00"
