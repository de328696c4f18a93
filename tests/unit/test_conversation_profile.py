"""The conversation profile's merge and the search it implies: pure functions over written conversations."""

from __future__ import annotations

import pytest

from gateway.conversations.profile import empty_profile, merge
from gateway.conversations.query import Fields, search_of
from gateway.conversations.reading import Vocabulary, mentions

VOCAB = Vocabulary(("향수", "꽃", "케이크", "와인", "향초", "지갑", "시계", "초콜릿"),
                   ("향", "꽃향", "알코올", "무알코올", "견과류", "각인", "가죽", "전자", "세트", "비건"))


def talk(turns: list[str], deltas: list[dict] | None = None) -> dict:
    profile = empty_profile()
    for i, text in enumerate(turns):
        profile = merge(profile, (deltas or [{}] * len(turns))[i], text, VOCAB).profile
    return profile


def test_code_alone_reads_the_budget_the_exclusions_and_who_it_is_for():
    p = talk(["아내 생일 선물 찾는데요", "예산은 10만 원 정도예요", "향수는 빼 주세요", "아, 꽃도 싫어해요"])
    assert (p["recipient"], p["occasion"], p["budget_min"], p["budget_max"]) == ("아내", "생일", None, 100_000)
    assert p["excluded_categories"] == ["향수", "꽃"] and p["forbidden"] == []


@pytest.mark.parametrize(("turns", "low", "high"), [
    (["3만 원에서 5만 원 사이요"], 30_000, 50_000),
    (["3만 원 이상 6만 원 이하로요"], 30_000, 60_000),
    (["5만 원 안쪽으로요"], None, 50_000),
    (["3만 원 이상이요"], 30_000, None),
    (["10만 원까지요", "아 예산 좀 늘려서 20만 원까지 괜찮아요"], None, 200_000),
    (["5만 원 이상", "3만 원 이하로 바꿀게요"], None, 30_000),  # a min above the new max is dropped
    (["책 3권이요"], None, None),  # a count, not an amount
])
def test_the_budget_is_read_by_code_and_a_later_amount_overrides_its_side(turns, low, high):
    p = talk(turns)
    assert (p["budget_min"], p["budget_max"]) == (low, high)


def test_the_models_number_never_sets_the_budget():
    p = talk(["예산은 10만 원 정도예요"], [{"budget_text": "10000원"}])
    assert p["budget_max"] == 100_000


def test_that_one_is_the_last_thing_mentioned():
    p = talk(["향수나 지갑이요", "향수는 취향을 타서 그건 빼고"], [{"want_categories": ["향수", "지갑"]}, {}])
    assert p["excluded_categories"] == ["향수"] and p["categories"] == ["지갑"]
    assert p["forbidden"] == []  # the 향 of 취향 is no mention
    p = talk(["시계나 지갑이요", "지갑이 좋겠네요", "아 그건 빼 주세요"],
             [{"want_categories": ["시계", "지갑"]}, {}, {}])
    assert p["excluded_categories"] == ["지갑"] and p["categories"] == ["시계"]  # from the turns before
    p = talk(["건강식품이요", "홍삼은 이미 많으셔서 그건 빼고요"])
    assert p["excluded_keywords"] == ["홍삼"] and p["excluded_categories"] == []


def test_an_exclusion_removes_an_inclusion_and_a_later_inclusion_lifts_it():
    p = talk(["향수 좋아해요", "아, 향수는 빼고 지갑으로 바꿀게요"],
             [{"want_categories": ["향수"]}, {"want_categories": ["지갑"], "exclude_categories": ["향수"]}])
    assert p["categories"] == ["지갑"] and p["excluded_categories"] == ["향수"]
    p = talk(["와인은 빼 주세요", "아니다, 와인 괜찮아요"], [{}, {"want_categories": ["와인"]}])
    assert p["categories"] == ["와인"] and p["excluded_categories"] == []


def test_a_turn_that_wants_and_refuses_one_thing_refuses_it_and_says_so():
    out = merge(empty_profile(), {"want_categories": ["향수"]}, "향수 좋긴 한데 향수는 빼 주세요", VOCAB)
    assert out.profile["excluded_categories"] == ["향수"] and out.profile["categories"] == []
    assert any("both wanted and excluded" in n for n in out.notes)


def test_what_the_turn_does_not_write_is_ignored_with_a_note():
    out = merge(empty_profile(), {"recipient": "어머니", "want_categories": ["시계"], "forbidden": ["가죽"]},
                "아버지 선물이요", VOCAB)
    assert out.profile["recipient"] == "아버지" and out.profile["categories"] == [] and out.profile["forbidden"] == []
    assert len(out.notes) == 3


def test_aliases_and_the_longest_word_decide_what_is_mentioned():
    p = talk(["그 집은 술을 안 마신대요", "꽃향은 싫대요", "견과류 알레르기가 있어요", "전기 제품은 무서워하세요"])
    assert p["forbidden"] == ["알코올", "꽃향", "견과류", "전자"] and p["excluded_categories"] == []
    assert [m.value for m in mentions("향초와 향수", VOCAB)] == ["향초", "향수"]


def test_the_search_puts_hard_constraints_in_filters_and_the_rest_in_the_query():
    p = talk(["아내 생일 선물이요", "향초나 초콜릿이요", "5만 원 이하", "술 들어간 건 빼 주세요", "각인 되는 걸로요"],
             [{}, {"want_categories": ["향초", "초콜릿"]}, {}, {}, {"must_have": ["각인"]}])
    spec = search_of(p, Fields(), top_k=5)
    assert spec["filter"]["must"] == [{"field": "price", "lte": 50_000}, {"field": "tags", "eq": "각인"}]
    assert spec["filter"]["must_not"] == [{"field": "tags", "any_of": ["알코올"]}]
    assert spec["queries"] == ["아내 생일 향초 선물", "아내 생일 초콜릿 선물"] and spec["top_k"] == 5
    assert search_of(empty_profile(), Fields()) == {"top_k": 10, "query": "선물"}


def test_a_refusal_belongs_to_the_mention_before_it_and_to_what_is_joined_to_that():
    p = talk(["전기 담요 같은 전자 제품은 빼 주세요"])
    assert p["forbidden"] == ["전자"] and p["categories"] == []  # 담요 is no vocabulary word here
    p = talk(["향수랑 꽃은 빼 주세요", "와인이나 시계요"])
    assert p["excluded_categories"] == ["향수", "꽃"] and p["categories"] == ["와인", "시계"]


def test_the_models_exclusion_of_a_wanted_thing_is_ignored():
    out = merge(empty_profile(), {"exclude_categories": ["향초", "지갑"], "forbidden": ["각인"]},
                "향초나 지갑 보여 주세요, 각인 되는 걸로요", VOCAB)
    assert out.profile["categories"] == ["향초", "지갑"] and out.profile["must_have"] == ["각인"]
    assert out.profile["excluded_categories"] == [] and sum("does not refuse" in n for n in out.notes) == 3


@pytest.mark.parametrize(("proposal", "turn", "who"), [
    ("친구 개업", "친구 개업 선물 찾아요", "친구"),  # the listed word inside the model's phrase
    ("팀원들", "팀원들한테 줄 크리스마스 선물이요", "팀원"),  # one short word the turn writes, particles off
    ("주얼리", "와이프 결혼기념일 선물이요, 주얼리요", "와이프"),  # a vocabulary word is never a person
    ("선물 알아보고 있어요", "선물 알아보고 있어요", None),  # not one short word
])
def test_the_recipient_is_a_listed_word_or_one_short_word_the_turn_writes(proposal, turn, who):
    vocab = Vocabulary(("주얼리",), ())
    assert merge(empty_profile(), {"recipient": proposal}, turn, vocab).profile["recipient"] == who


def test_an_attribute_is_a_must_have_only_when_the_turn_asks_for_it():
    p = talk(["와인 세트 괜찮을까요", "아 그분이 술을 못 드신대요"])
    assert p["must_have"] == [] and p["forbidden"] == ["알코올"]
    p = talk(["각인 되는 걸로요", "비건이면 더 좋아요"], [{}, {"must_have": ["비건"]}])
    assert p["must_have"] == ["각인"]
    p = talk(["지갑이나 시계요", "시계는 됐고 지갑만 볼게요"])
    assert p["categories"] == ["지갑"] and p["excluded_categories"] == ["시계"]
