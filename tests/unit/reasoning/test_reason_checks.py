"""The checks every reason card passes before a user reads it (services/reasoning/checks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.reasoning.checks import CheckRules, check_reason, repeated_phrase
from services.reasoning.prompts import REASONS_EXAMPLES

QUERY = "부모님 결혼기념일 선물"
CANDLES = ("향초와 디퓨저 세트", "리빙, 은은한 라벤더 향, 39,000원")
SCARF = ("커플 실크 스카프", "패션, 결혼기념일 선물로 인기, 48,000원")
GOOD_SHORT = "두 분의 저녁을 은은하게 채워 줄 향기 선물"
GOOD_LONG = ("라벤더 향이 은은해서 기념일 저녁을 차분한 분위기로 만들어 줍니다. "
             "부담 없는 가격이라 자녀가 드리기에도 좋습니다.")


def kinds(short: str, long: str, item=CANDLES, others=(SCARF,), query=QUERY) -> set[str]:
    findings = check_reason(short, long, title=item[0], description=item[1], query=query, others=list(others))
    return {f.kind for f in findings}


def test_a_reason_about_its_own_item_passes():
    assert kinds(GOOD_SHORT, GOOD_LONG) == set()


def test_the_title_word_for_word_is_a_copy():
    assert "copy" in kinds("향초와 디퓨저 세트", GOOD_LONG)
    assert "copy" in kinds(GOOD_SHORT, "리빙 제품, 은은한 라벤더 향의 향초와 디퓨저 세트입니다.")


def test_the_prompts_instruction_echoed_is_a_copy():
    echoed = "라벤더 향이 은은합니다. 이 상품이 '부모님 결혼기념일 선물'에 왜 맞는지 short와 long을 쓰세요."
    found = check_reason(GOOD_SHORT, echoed, title=CANDLES[0], description=CANDLES[1], query=QUERY, others=[])
    assert [(f.kind, f.field) for f in found] == [("copy", "long")] and "지시문" in found[0].detail
    noted = "라벤더 향이 은은한 선물입니다. 상품명과 설명을 그대로 옮겼습니다."  # a regeneration's note echoed
    assert "copy" in {f.kind for f in check_reason(GOOD_SHORT, noted, title=CANDLES[0], description=CANDLES[1],
                                                   query=QUERY, others=[])}


def test_a_reason_that_is_only_the_query_is_a_copy():
    found = check_reason("부모님 결혼기념일 선물", GOOD_LONG, title=CANDLES[0], description=CANDLES[1], query=QUERY,
                         others=[])
    assert [(f.kind, f.field) for f in found] == [("copy", "short")] and "검색어" in found[0].detail


def test_naming_the_item_once_in_a_sentence_of_its_own_is_not_a_copy():
    assert "copy" not in kinds("향초와 디퓨저 세트로 기념일 분위기를", GOOD_LONG)


def test_another_items_fact_is_contamination_unless_the_query_or_the_item_has_it():
    borrowed = "실크처럼 부드러운 향이 두 분께 잘 어울립니다. 거실에 두면 기념일 내내 은은합니다."
    found = check_reason(GOOD_SHORT, borrowed, title=CANDLES[0], description=CANDLES[1], query=QUERY, others=[SCARF])
    assert [f.kind for f in found] == ["foreign_item"] and "실크" in found[0].detail
    # "결혼기념일" is the other card's occasion, but also the query's: allowed.
    shared = "결혼기념일 저녁을 차분한 분위기로 만들어 줍니다. 부담 없는 가격이라 드리기에도 좋습니다."
    assert kinds(GOOD_SHORT, shared) == set()
    # A price of the other card (written with or without the comma) is a fact of the other card.
    price = "48000원으로 부담 없는 가격입니다. 기념일 저녁을 차분하게 만들어 줍니다."
    assert "foreign_item" in kinds(GOOD_SHORT, price)


def test_english_short_length_duplicate_and_repetition():
    assert "not_korean" in kinds("Great gift for parents", "A lovely candle set your parents will enjoy tonight.")
    assert kinds("좋아요", GOOD_LONG) == {"length"}
    assert "length" in kinds(GOOD_SHORT, "좋습니다.")
    short = "기념일에 두 분이 함께 켜 두기 좋은 향초"
    assert "duplicate" in kinds(short, short + "입니다. 좋습니다.")
    looped = "부모님과 부모님의 친구들에게 자랑하기 좋습니다. 부모님과 부모님의 친구들에게 향을 나눌 수 있습니다."
    assert kinds(GOOD_SHORT, looped) == {"repetition"}
    assert repeated_phrase(looped, 12) == "부모님과부모님의친구들에"


def test_thresholds_are_rules_not_constants():
    strict = CheckRules(copy_containment=0.0)
    assert check_reason("향초와 디퓨저 세트로 기념일 분위기를", GOOD_LONG, title=CANDLES[0], description=CANDLES[1],
                        query=QUERY, others=[], rules=strict)[0].kind == "copy"


def test_the_prompts_own_example_passes_every_check():
    for query, title, description, reason in REASONS_EXAMPLES:
        others = [(t, d) for _, t, d, _ in REASONS_EXAMPLES if t != title]
        # Every check but the one against copying the example (which it is, word for word).
        assert check_reason(reason["short"], reason["long"], title=title, description=description,
                            query=query, others=others, examples=()) == []


def test_the_worked_example_copied_onto_another_item_is_a_copy():
    # Seen from Gemma 3 270M: the worked example's reason (then a camping chair's) written for an
    # anniversary gift.
    chair = REASONS_EXAMPLES[0][3]
    found = check_reason(chair["short"], chair["long"], title=SCARF[0], description=SCARF[1], query=QUERY,
                         others=[CANDLES])
    assert {(f.kind, f.field) for f in found} >= {("copy", "short"), ("copy", "long")}
    assert all("예시" in f.detail for f in found if f.kind == "copy")


def test_an_item_like_the_examples_may_use_its_own_words():
    # A real camping chair for a camping query shares words with the example; only its own and the
    # query's words do, so it is not a copy of the example.
    chair = ("경량 캠핑 의자", "캠핑용품, 접이식, 1.0kg, 45,000원")
    short = "처음 캠핑 가는 친구가 가볍게 챙길 의자"
    long = "1kg 남짓이라 배낭에 걸고 다니다 어디서든 펴고 앉을 수 있습니다."
    assert kinds(short, long, item=chair, others=(), query="캠핑 입문 선물") == set()


@pytest.mark.parametrize("name", ["tune", "eval"])
def test_the_labelled_sets_are_well_formed(name):
    data = json.loads((Path(__file__).parents[3] / "bench" / "data" / f"reasoning_checks_{name}.json").read_text())
    for case in data["cases"]:
        ids = {i["id"] for i in case["items"]}
        for card in case["cards"]:
            assert card["id"] in ids and set(card["labels"]) <= {"copy", "foreign_item", "not_korean", "length",
                                                                  "duplicate", "repetition"}


def test_only_the_querys_words_is_a_copy_of_the_query_but_using_some_of_them_is_not():
    # Seen from the 1.5B model: the query as every card's short, once with one particle changed.
    query = "요리를 좋아하는 어머니 생신 선물"
    pot = ("스테인리스 냄비 3종 세트", "주방용품, 49,000원")
    long = "매일 요리하시는 어머니께서 오래 두고 쓰실 수 있는 튼튼한 냄비입니다."
    assert "copy" in kinds("요리를 좋아하는 어머니 생신 선물", long, item=pot, others=(), query=query)
    assert "copy" in kinds("요리가 좋아하는 어머니 생신 선물", long, item=pot, others=(), query=query)
    assert "copy" in kinds("어머니 생신 선물", long, item=pot, others=(), query=query)
    assert kinds("요리를 좋아하는 어머니께 딱 맞는 냄비", long, item=pot, others=(), query=query) == set()


def test_letters_of_another_script_inside_korean_are_not_korean():
    # Seen from the 1.5B model: 어머ニ, 어머ни in otherwise Korean reasons.
    assert "not_korean" in kinds("두 분의 저녁을 은은하게 채워 줄 향기 선ニ", GOOD_LONG)
    assert "not_korean" in kinds(GOOD_SHORT, GOOD_LONG.replace("부담", "부ни"))
    assert kinds(GOOD_SHORT + " (香)", GOOD_LONG) == set()  # Hanja and Latin are no slip
    assert kinds("LED 조명처럼 은은한 향기 선물", GOOD_LONG) == set()
