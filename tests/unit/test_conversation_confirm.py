"""The confirm screen's code: display keywords, what a turn lacks, and the check on what the model writes."""

from __future__ import annotations

from gateway.conversations import confirm
from gateway.conversations.profile import empty_profile
from gateway.conversations.reading import Vocabulary

VOCAB = Vocabulary(("향수", "꽃", "케이크", "와인", "향초", "지갑", "시계"),
                   ("알코올", "견과류", "각인", "비건", "가죽"))


def profile(**kw) -> dict:
    return {**empty_profile(), **kw}


FATHER = profile(recipient="아버지", occasion="생신", budget_max=150_000, categories=["시계", "지갑"],
                 forbidden=["가죽"], keywords=["실용적인"])


def test_keywords_read_who_why_what_how_much_then_what_is_left_out() -> None:
    assert confirm.keywords(FATHER) == ["아버지", "생신", "시계", "지갑", "실용적인", "15만 원 이하", "가죽 제외"]
    many = profile(recipient="아내", categories=["향수", "꽃", "케이크", "와인", "향초"], must_have=["각인", "비건"],
                   keywords=["은은한"], budget_min=50_000, budget_max=100_000)
    assert len(confirm.keywords(many)) == confirm.MAX_KEYWORDS and confirm.keywords(many)[0] == "아내"
    taken_back = profile(keywords=["빨간", "큰"], excluded_keywords=["빨간"])
    assert confirm.keywords(taken_back) == ["큰"]


def test_budget_phrases() -> None:
    assert confirm.budget_phrase(profile(budget_min=50_000, budget_max=100_000)) == "5만~10만 원"
    assert confirm.budget_phrase(profile(budget_min=30_000)) == "3만 원 이상"
    assert confirm.budget_phrase(profile(budget_max=12_500)) == "12,500원 이하"
    assert confirm.budget_phrase(profile()) is None


def test_what_is_missing_is_chosen_by_code_in_the_order_to_ask() -> None:
    assert confirm.missing(profile()) == ["recipient", "occasion", "budget"]
    assert confirm.missing(profile(recipient="엄마", budget_min=10_000)) == ["occasion"]
    assert confirm.missing(FATHER) == []


def test_a_summary_holding_only_the_profile_passes() -> None:
    good = "아버지 생신 선물로 15만 원 이하의 실용적인 시계나 지갑을 찾고 있어요. 가죽 제품은 빼 주세요."
    assert confirm.unfaithful(good, FATHER, VOCAB) == []
    assert confirm.unfaithful("아버지 생신에 드릴 십오만 원 안쪽 시계를 찾아요.", FATHER, VOCAB) == []


def test_a_made_up_amount_recipient_or_thing_is_caught() -> None:
    assert "'20만'" in confirm.unfaithful("아버지 생신 선물, 예산 20만 원의 시계", FATHER, VOCAB)[0]
    assert any("recipient '어머니'" in p for p in confirm.unfaithful("어머니 생신 선물로 시계", FATHER, VOCAB))
    assert any("occasion '결혼기념일'" in p for p in confirm.unfaithful("아버지 결혼기념일 시계", FATHER, VOCAB))
    assert any("'와인' is not in the profile" in p for p in confirm.unfaithful("아버지께 와인", FATHER, VOCAB))
    assert any("'가죽' is left out" in p for p in confirm.unfaithful("아버지께 가죽 지갑을 드려요", FATHER, VOCAB))


def test_a_reason_may_use_its_items_words() -> None:
    reason = "와인을 좋아하시는 아버지께 2병 세트가 어울려요."
    assert confirm.unfaithful(reason, FATHER, VOCAB) != []
    assert confirm.unfaithful(reason, FATHER, VOCAB, also=["[와인] 레드 와인 2병 세트", "와인"]) == []


def test_the_reply_prompt_names_only_what_code_asks_for() -> None:
    (_, system), (_, user) = confirm.reply_messages(profile(recipient="엄마"), ["occasion", "budget"], "엄마 선물요")
    assert "어떤 날이나 계기의 선물인지 그리고 예산이 얼마인지를 물어보세요" in user and "받는 사람: 엄마" in user
    assert "누구에게" not in user
    (_, _), (_, done) = confirm.reply_messages(FATHER, [], "가죽은 싫어하세요")
    assert "다 모였으니" in done


def test_a_vocabulary_word_counts_only_as_a_word_of_its_own() -> None:
    vocab = Vocabulary(("향수", "향초", "꽃"), ("향", "가죽"))
    wife = profile(recipient="아내", categories=["향초"], excluded_categories=["향수"])
    assert confirm.unfaithful("아내에게 향초를 드려요. 향수는 빼고요.", wife, vocab) == []  # 향 of 향초, 향수
    assert confirm.unfaithful("아내에게 꽃다발과 향초를", wife, vocab) == []  # 꽃 of 꽃다발: another word
    assert confirm.unfaithful("아내가 좋아하는 향이 나는 향초", wife, vocab) == ["'향' is not in the profile"]


def test_generic_words_and_words_already_shown_are_no_keywords() -> None:
    mom = profile(recipient="엄마", occasion="어버이날", categories=["화장품"],
                  keywords=["선물", "엄마 어버이날", "순한"])
    assert confirm.keywords(mom) == ["엄마", "어버이날", "화장품", "순한"]


def test_a_left_out_word_may_be_named_with_a_negation_by_grammar() -> None:
    boss = profile(recipient="팀장님", occasion="승진", excluded_categories=["와인"], categories=["책"])
    for text in ("팀장님 승진 선물로 와인을 드시지 않으니 책을 찾아요.", "와인 대신 책으로 팀장님 승진을 축하해요.",
                 "팀장님 승진 선물, 와인 없는 책 선물이요."):
        assert confirm.unfaithful(text, boss, VOCAB) == [], text
    assert confirm.unfaithful("팀장님 승진 선물로 와인과 책을 찾아요.", boss, VOCAB) != []


def test_a_day_word_alone_is_no_occasion() -> None:
    assert confirm.unfaithful("어떤 날을 위한 선물인가요?", profile(recipient="선배", occasion="결혼"), VOCAB) == []


def test_a_left_out_word_may_be_named_as_already_had_or_given() -> None:
    girl = profile(recipient="여자친구", occasion="100일", categories=["주얼리"], excluded_categories=["향수"])
    vocab = Vocabulary(("향수", "주얼리"), ())
    for text in ("여자친구 100일 선물로 주얼리를 찾아요. 향수는 이미 가지고 있어요.",
                 "향수는 지난번에 줬으니 주얼리로"):
        assert confirm.unfaithful(text, girl, vocab) == [], text


def test_an_amount_written_with_a_space_before_its_unit_is_read_whole() -> None:
    mom = profile(recipient="엄마", budget_min=200_000, budget_max=400_000)
    assert confirm.unfaithful("엄마 선물, 20만 원에서 40 만 원 사이", mom, VOCAB) == []
    assert confirm.unfaithful("엄마 선물, 50 만 원", mom, VOCAB) == ["the number '50만' is not the profile's"]
