"""Issue 57's table, row by row: what the mesh read wrong before, read right now (one named test a row)."""

from __future__ import annotations

from datetime import date, time

import pytest

from gateway.answers.packing import Passage
from gateway.answers.support import check, numbered
from gateway.conversations.profile import empty_profile, merge
from gateway.conversations.reading import Vocabulary
from gateway.conversations.related import nearest, to_relate
from services.ocr.pii.detector import detect
from services.reasoning.arguments import MONEY, correct, grounded
from services.reasoning.completions import cut_reply
from services.runtime.korean import dates
from services.runtime.korean.amounts import amounts
from services.runtime.tasks import post

REF = date(2026, 12, 7)  # a Monday
BOOKS = {"type": "object", "properties": {"query": {"type": "string"},
                                          "max_price": {"type": "integer", "description": "최대 가격(원)"}},
         "required": ["query"]}
SEND = {"type": "object", "properties": {"amount": {"type": "integer", "description": "보낼 금액(원)"},
                                         "to": {"type": "string"}}, "required": ["amount"]}
SALARY = {"type": "object", "properties": {"salary": {"type": "integer", "description": "연봉(원)"}},
          "required": ["salary"]}
GIFTS = Vocabulary(("식품", "액세서리", "주방용품", "게임기", "꽃", "향수"), ("알코올",))


def _values(text):
    return [(a.value, a.bound, a.high) for a in amounts(text)]


def test_row_budget_written_in_sino_korean_numerals():
    p = merge(empty_profile(), {}, "예산은 오만 원", GIFTS).profile
    assert (p["budget_min"], p["budget_max"]) == (None, 50_000)


def test_row_tool_argument_man_ocheon_won_is_15000():
    got = correct({"query": "데이터 분석 책", "max_price": 1000}, BOOKS, "데이터 분석 책 만오천원 이하", REF)
    assert got["max_price"] == 15_000


def test_row_the_models_right_amount_is_kept():
    same = {"amount": 50_000, "to": "엄마"}
    assert correct(same, SEND, "오만원 보내줘", REF) is same


def test_row_salary_in_mixed_units_is_one_amount_and_grounds_the_call():
    assert _values("연봉 3천5백만원") == [(35_000_000, None, None)]
    assert grounded({"salary": 35_000_000}, SALARY, "연봉 3천5백만원 받으면 세금은?", REF)


def test_row_jeonse_three_eok_five_cheon():
    assert _values("전세 3억5천") == [(350_000_000, None, None)]


def test_row_dae_ranges_counts_names_and_english_words():
    assert _values("10만원대") == [(100_000, "range", 199_999)]
    assert amounts("팔로워 3천명") == [] and amounts("V8 엔진") == []
    assert not MONEY.search("coffee") and not MONEY.search("display name")
    assert MONEY.search("max_price") and MONEY.search("maxPrice") and MONEY.search("최대 가격")


def test_row_relative_days_inside_words_are_no_dates():
    assert dates.scan("입금일: 3월 10일", REF)[0].start.day == date(2027, 3, 10)
    assert dates.scan("국민내일배움카드 신청 마감 3월 10일", REF)[0].start.day == date(2027, 3, 10)


def test_row_midnight_durations_decimals_and_weekends():
    assert dates.time_of_day("밤 12시에 마감") == time(23, 59)
    assert dates.time_of_day("2시간 동안 회의") is None
    assert [d.minutes for d in dates.durations("2시간 동안 회의")] == [120]
    assert dates.scan("1.5시간, 3월 9일", REF)[0].start.day == date(2027, 3, 9)
    weekend = dates.scan("이번 주말", REF)[0]
    assert weekend.start.day == date(2026, 12, 12) and weekend.end is not None and weekend.end.day == date(2026, 12, 13)


@pytest.mark.parametrize(("turn", "excluded"), [
    ("액세서리는 지난번에 줬어", "액세서리"), ("주방용품은 이미 다 있대", "주방용품"), ("게임기는 있어", "게임기")])
def test_row_refusals_without_a_refusal_word(turn, excluded):
    p = merge(empty_profile(), {}, turn, GIFTS).profile
    assert p["excluded_categories"] == [excluded]


def test_row_a_described_refusal_takes_the_vocabulary_entries_the_serving_layer_found():
    related = {"먹는 것": [("category", "식품")]}
    p = merge(empty_profile(), {}, "먹는 건 말고", GIFTS, related).profile
    assert p["excluded_categories"] == ["식품"]
    alone = merge(empty_profile(), {}, "먹는 건 말고", GIFTS).profile  # nothing found near it: nothing excluded
    assert alone["excluded_categories"] == [] and alone["excluded_keywords"] == ["먹는"]
    proposed = merge(empty_profile(), {"exclude_categories": ["음식"]}, "먹는 건 말고", GIFTS,
                     {"음식": [("category", "식품")]}).profile  # the model's word, its nearest entry
    assert proposed["excluded_categories"] == ["식품"]
    assert to_relate("먹는 건 말고", {"exclude_categories": ["음식", "꽃"]}, GIFTS) == ["음식", "먹는 것"]
    noise = merge(empty_profile(), {"exclude_categories": ["꽃"]}, "향수 좋아해요", GIFTS).profile
    assert noise["excluded_categories"] == [], "a proposal without a refusal in the turn is noise"


def test_the_nearest_entry_needs_a_floor_and_a_margin():
    entries = [("category", "케이크"), ("category", "책")]
    assert nearest([0.93, 0.89], entries) == [("category", "케이크")]
    assert nearest([0.885, 0.88], entries) == [], "too close to the next"
    assert nearest([0.86, 0.80], entries) == [], "below the floor"


def test_row_a_wish_with_possession_words_is_no_refusal():
    p = merge(empty_profile(), {}, "꽃은 좋아해요, 향수 있는 걸로요", GIFTS).profile
    assert p["excluded_categories"] == [] and "꽃" in p["categories"]


def test_row_housewarming_recipient_and_occasion():
    p = merge(empty_profile(), {"recipient": "집들이", "occasion": "선물"}, "집들이 선물 추천해 줘", GIFTS).profile
    assert (p["recipient"], p["occasion"]) == (None, "집들이")
    p = merge(p, {"recipient": "친구", "occasion": ""}, "친구네 신혼집이야", GIFTS).profile
    assert (p["recipient"], p["occasion"]) == ("친구", "집들이")


def test_row_a_resume_whose_first_line_is_the_name():
    text = ("김하늘\n백엔드 개발자 · 5년차\n경력사항\n- 네이버 백엔드 개발 (2019.03 ~ 2023.12)\n"
            "성장과정\n- 정보보안 교육 이수")
    names = [text[s.start:s.end] for s in detect(text) if s.kind == "person"]
    assert names == ["김하늘"]


def test_row_final_interview_is_an_interview():
    value = {"text": "[네이버] 최종면접 안내\n일시: 12월 10일 오후 2시", "reference_date": "2026-12-07",
             "timezone": None}
    output = {"company": "네이버", "stage": "최종발표", "title": "최종면접", "start_text": "12월 10일 오후 2시",
              "end_text": ""}
    assert post.calendar_dates(output, value)["stage"] == "면접"


def test_row_a_numbers_unit_is_part_of_it():
    text = "미사용 연차는 최대 5일까지 다음 해로 이월할 수 있습니다."
    got = numbered([Passage(1, "a", 0, len(text), text, 1.0, 0.9, {})])
    assert check("최대 5년입니다.", [1], got, "육아휴직은 최대 몇 년?").reason == "number_not_in_evidence"
    assert check("최대 5일까지 이월할 수 있습니다.", [1], got, "연차는 며칠까지 이월?").supported


@pytest.mark.parametrize("zone", ["Asia", "Asia/", "../etc/passwd", "", "Mars/Olympus", "Asia/Seoul\x00"])
def test_a_bad_timezone_is_a_400_naming_the_field(zone):
    if not zone:
        assert post.reference({"timezone": zone})[1].key == "Asia/Seoul"
        return
    with pytest.raises(post.PostError) as bad:
        post.reference({"timezone": zone})
    assert bad.value.field == "input.timezone"


def test_an_escaped_emoji_is_one_character_and_a_cut_pair_is_dropped():
    head = '{"tool": "reply_directly", "answer": "좋아요 '
    assert cut_reply(head + '\\ud83d\\ude00 다음"}') == "좋아요 😀 다음"
    assert cut_reply(head + "\\ud83d") == "좋아요 "
    assert cut_reply(head + "\\ude00 x") == "좋아요 "


def test_long_texts_are_read_in_one_pass():
    crafted = ("1.2.3.4.5 일 월 3만 원 " * 10_000)[:200_000]
    assert len(amounts(crafted)) >= 9_000  # finishes (it took 20 s quadratic); speed is bench.korean_reading's
    assert isinstance(dates.scan(crafted, REF), list)


def test_the_models_exclude_last_counts_only_when_the_refusal_names_nothing_itself():
    p = merge(empty_profile(), {}, "향수 어때요", GIFTS).profile
    assert merge(p, {"exclude_last": True}, "별로예요", GIFTS).profile["excluded_categories"] == ["향수"]
    own = merge(p, {"exclude_last": True}, "홍삼 말고 다른 걸로요", GIFTS).profile  # it refuses 홍삼, not 향수
    assert own["excluded_categories"] == [] and own["excluded_keywords"] == ["홍삼"]
