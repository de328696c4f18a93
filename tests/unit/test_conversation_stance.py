"""The model's stances checked by code (gateway/conversations/stance.py), corrections and kin compounds (issue 80).

Generated round trips: a refusal proposed beside an acceptance (any stem, any ending) never excludes; one
beside a predicate with no acceptance (or a negated one) does; a bare listing never does; a later amount
that revises an earlier one replaces it, a range keeps both ends.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.conversations.budget import budget
from gateway.conversations.confirm import won
from gateway.conversations.profile import empty_profile, merge
from gateway.conversations.reading import Vocabulary
from gateway.conversations.stance import accepts, nominal

VOCAB = Vocabulary(("향수", "꽃", "케이크", "와인", "향초", "지갑", "시계", "초콜릿", "머그컵", "장난감"),
                   ("알코올", "전자", "가죽", "각인"))
THINGS = st.sampled_from(["향수", "꽃", "케이크", "와인", "향초", "지갑", "시계", "초콜릿", "머그컵", "장난감"])
TOPIC = st.sampled_from(["은/는", "도", "이/가"])


def josa(word: str, particle: str) -> str:
    """``word`` with the form of ``particle`` its last syllable takes (향수는, 꽃은; 향수나, 꽃이나)."""
    if "/" not in particle:
        return word + particle
    after_consonant, after_vowel = particle.split("/")
    return word + (after_consonant if (ord(word[-1]) - 0xAC00) % 28 else after_vowel)
ACCEPT_STEMS = ["괜찮", "좋", "좋아하", "낫", "원하"]
ENDINGS = {"괜찮": ["아요", "아", "을 것 같아", "대요", "으실 거야", "던데"],
           "좋": ["아요", "겠어", "을 듯", "대", "네요"],
           "좋아하": ["세요", "셔", "실걸", "더라"], "낫": ["겠다", "지"], "원하": ["세요", "신대"]}
REFUSING = ["이미 차고 다니셔", "취향을 타서 패스할게요", "끊으셨어", "병원에서 안 된대", "회사에서 받는대",
            "요즘 누가 써", "이제 못 읽으셔", "어려우실 거야", "피하셔야 해", "친척들이 잔뜩 사 줬대", "질색이야",
            "안 좋아하셔", "좋아하지 않으셔", "괜찮지 않대", "안좋아해"]


def refuse(thing: str) -> dict:
    return {"stances": [{"thing": thing, "stance": "refuse"}]}


def test_acceptance_grammar_reads_negation():
    assert accepts("는 괜찮아요") and accepts("도 좋고") and accepts(" 어때?") and accepts("는 사 줘도 돼")
    assert not accepts("는 이가 안 좋으셔서 어려우실 거야") and not accepts("는 좋아하시진 않아")
    assert not accepts("는 좋지 않아") and not accepts("는 병원에서 안 된대")


@settings(max_examples=120, deadline=None)
@given(THINGS, TOPIC, st.sampled_from(ACCEPT_STEMS), st.data())
def test_a_refusal_the_model_proposes_beside_an_acceptance_never_excludes(thing, particle, stem, data):
    adverb = data.draw(st.sampled_from(["", "그냥 ", "오히려 "]))
    text = f"{josa(thing, particle)} {adverb}{stem}{data.draw(st.sampled_from(ENDINGS[stem]))}"
    p = merge(empty_profile(), refuse(thing), text, VOCAB).profile
    assert thing not in p["excluded_categories"] and thing in p["categories"], text


@settings(max_examples=120, deadline=None)
@given(THINGS, TOPIC, st.sampled_from(REFUSING))
def test_a_refusal_the_model_proposes_beside_a_predicate_excludes_and_code_alone_does_not_guess(thing, particle,
                                                                                                 said):
    text = f"{josa(thing, particle)} {said}"
    assert thing in merge(empty_profile(), refuse(thing), text, VOCAB).profile["excluded_categories"], text
    assert merge(empty_profile(), {"stances": [{"thing": thing, "stance": "have"}]}, text,
                 VOCAB).profile["excluded_categories"] == [thing]


@settings(max_examples=60, deadline=None)
@given(THINGS, THINGS, st.sampled_from(["이나/나", "이랑/랑", "과/와", "하고"]), st.integers(1, 40))
def test_a_bare_listing_is_no_refusal_whatever_the_model_says(a, b, joined, man):
    if a == b:
        return
    text = f"{man}만 원 이하로 {josa(a, joined)} {b}"
    p = merge(empty_profile(), {"stances": [{"thing": a, "stance": "refuse"}, {"thing": b, "stance": "have"}]},
              text, VOCAB).profile
    assert p["excluded_categories"] == [] and set(p["categories"]) == {a, b}, text


def test_a_listing_joined_to_a_refused_thing_is_refused_with_it():
    both = {"stances": [{"thing": "향수", "stance": "refuse"}, {"thing": "꽃", "stance": "refuse"}]}
    p = merge(empty_profile(), both,
              "향수랑 꽃은 병원에서 안 된대요", VOCAB).profile
    assert p["excluded_categories"] == ["향수", "꽃"]


def test_what_the_turn_does_not_write_is_no_refusal_and_aliases_count():
    had = merge(empty_profile(), refuse("시계"), "지갑은 이미 있어서", VOCAB).profile
    assert had["excluded_categories"] == ["지갑"]
    out = merge(empty_profile(), refuse("시계"), "가방 보여 주세요", VOCAB)
    assert out.profile["excluded_categories"] == [] and any("does not write" in n for n in out.notes)
    assert merge(empty_profile(), refuse("술"), "술은 끊으셨어", Vocabulary(("와인",), ("알코올",))).profile[
        "forbidden"] == ["알코올"]


def test_a_refused_thing_outside_the_vocabulary_is_kept_out_of_the_query_only_when_it_is_a_thing():
    p = merge(empty_profile(), refuse("홍삼"), "홍삼은 질리셨대", VOCAB).profile
    assert p["excluded_keywords"] == ["홍삼"]
    p = merge(empty_profile(), refuse("알아보고"), "엄마 선물 알아보고 있어요", VOCAB).profile
    assert p["excluded_keywords"] == []
    p = merge(empty_profile(), {"keywords": ["찾고", "때문에 비싼", "텀블러"]}, "텀블러 때문에 비싼 거 찾고 있어",
              VOCAB).profile
    assert p["keywords"] == ["텀블러"]


def test_words_that_are_not_things():
    assert nominal("홍삼") and nominal("커피 세트") and nominal("레고")
    assert not nominal("알아보고") and not nominal("찾고") and not nominal("때문에 비싼") and not nominal("비싼")


AMOUNTS = st.integers(1, 60).map(lambda n: n * 10_000)


@settings(max_examples=150, deadline=None)
@given(AMOUNTS, AMOUNTS, st.sampled_from(["예산은 {a}이었는데 {b}까지 늘릴게", "{a} 생각했는데 {b}까지 볼게",
                                          "{a} 말고 {b} 이하로", "{a}에서 {b}으로 올릴게요", "{a}였는데 {b}로 바꿀게요",
                                          "아니다, {a}이 아니라 {b}까지"]))
def test_a_later_amount_that_revises_an_earlier_one_replaces_it(a, b, template):
    text = template.format(a=won(a), b=won(b))
    assert budget(text, empty_profile()) == (None, b), text


@settings(max_examples=80, deadline=None)
@given(AMOUNTS, AMOUNTS, st.sampled_from(["{a}에서 {b} 사이", "{a}부터 {b}까지", "{a} 이상 {b} 이하"]))
def test_a_range_keeps_both_ends(a, b, template):
    if a >= b:
        return
    assert budget(template.format(a=won(a), b=won(b)), empty_profile()) == (a, b)


@given(st.sampled_from(["친구", "동생", "언니", "사촌", "선배"]), st.sampled_from(["아들", "딸"]),
       st.sampled_from(["", "의"]), st.sampled_from(["돌잔치", "돌", "백일", "입학"]))
def test_kin_told_through_another_person_is_one_recipient_and_the_occasion_is_read(who, kin, of, occasion):
    text = f"{who}{of} {kin} {occasion} 선물이에요"
    p = merge(empty_profile(), {}, text, VOCAB).profile
    assert (p["recipient"], p["occasion"]) == (f"{who} {kin}", occasion), text


def test_one_syllable_words_and_titles_are_whole_words():
    assert merge(empty_profile(), {}, "딸기 케이크 보여 주세요", VOCAB).profile["recipient"] is None
    assert merge(empty_profile(), {}, "이사님 승진 선물", VOCAB).profile["occasion"] == "승진"
    assert merge(empty_profile(), {}, "병문안 가는데 뭐가 좋을까", VOCAB).profile["occasion"] == "병문안"


COMMENTS = ["스마트워치 하나로 충분하대", "코가 예민해서 곤란해", "카페인 때문에 밤잠을 설쳐", "둘 데가 없대",
            "학교 규정에 걸린대", "손도 안 대실 거야", "의미 없어"]
NOT_REFUSING = ["괜찮을 것 같아", "좋아하실 거야", "어떤 게 인기 있어?", "뭐가 좋을까", "가죽으로 된 걸로",
                "작은 거면 좋겠어", "얼마 정도 해요?", "추천해 주세요", "세트로 해 주세요"]


@settings(max_examples=80, deadline=None)
@given(THINGS, st.sampled_from(["은/는", "도"]), st.sampled_from(COMMENTS))
def test_code_reads_a_topic_whose_comment_neither_accepts_nor_asks_as_a_refusal(thing, particle, said):
    text = f"{josa(thing, particle)} {said}"
    assert merge(empty_profile(), {}, text, VOCAB).profile["excluded_categories"] == [thing], text


@settings(max_examples=80, deadline=None)
@given(THINGS, st.sampled_from(["은/는", "도"]), st.sampled_from(NOT_REFUSING))
def test_a_topic_the_turn_asks_about_accepts_or_describes_is_never_refused(thing, particle, said):
    text = f"{josa(thing, particle)} {said}"
    p = merge(empty_profile(), refuse(thing), text, VOCAB).profile
    assert p["excluded_categories"] == [] and thing in p["categories"], text


def test_a_topic_comment_crosses_a_later_mention_without_a_predicate_of_its_own():
    p = merge(empty_profile(), {}, "와인은 둘 다 술을 멀리해서 의미 없어", Vocabulary(("와인",), ("알코올",))).profile
    assert "와인" in p["excluded_categories"]


def test_a_budgets_correction_word_is_no_refusal_of_the_last_thing():
    p = {**empty_profile(), "categories": ["와인"], "last_mentioned": ["category", "와인"]}
    out = merge(p, {"exclude_last": True}, "예산은 5만 원 말고 7만 원 이하로", VOCAB).profile
    assert out["excluded_categories"] == [] and out["budget_max"] == 70_000 and out["categories"] == ["와인"]


def test_keywords_are_content_nouns_not_who_why_or_what_was_refused():
    out = merge(empty_profile(), {"keywords": ["생크림", "남편", "승진 선물", "원두"]},
                "남편 승진 선물이요. 케이크는 생크림 때문에 속이 더부룩해. 원두는 좋아해", VOCAB).profile
    assert out["keywords"] == ["원두"] and out["excluded_categories"] == ["케이크"]
