"""Whether a new question asks what a cached one asked, decided by code after the vectors agree.

A paraphrase and a near-miss are equally close as vectors ("주니어 백엔드 첫 연봉" and "시니어 백엔드 첫
연봉": 0.99, closer than most paraphrases), so the cosine only nominates; code decides, with stated
rules (not a word list), given the cached answer's passages and the sentences it cites:

1. **numbers**: the two questions hold the same numbers, as values with their units, read by grammar
   (:func:`gateway.answers.support.numbers`: "만 원" and "1만 원" are both 10000원) and native numerals
   before a unit ("두 달" is 2개월, as "2개월" is);
2. **new_term**: a content term of the new question that the cached one lacks must not be one the
   passages hold outside the cited sentences — the question then names something else the collection
   speaks of ("전자책" where the answer cites the sentence on paper books);
3. **replaced_term**: when the new question adds a term, it must not drop one the passages hold —
   what the answer rests on was put aside for something else ("시니어" for "주니어"; "온기 선물상점"
   for "책마루", named in the passage's title rather than in the cited sentence);
4. **asks**: the two questions ask for the same kind of answer — the same question words by class
   (where, who, when, how much, how many, what) and the same type, unit and counter as
   :func:`gateway.answers.question.read` reads them. Found on answers split E, where "솔빛베이커리
   부산점은 어디에 있어?" was served the cached answer to "…부산점 대표 메뉴가 뭐야?" (유자 크루아상), and
   "대출 기간은 며칠이야?" the one to "…평일 몇 시까지 열어?": no term was added, so rules 2 and 3 let
   them through.

Terms are the question's nouns, read by grammar without a morphological analyser (the gateway has
none; Kiwi costs 300 MB and tags "한결" as an adverb): a word ending in a verb's ending ("나오나요",
"배워요") is a predicate and no term; a noun keeps its stem before a particle, the copula or 하다/되다
("주문하면" → 주문, "얼마예요" → 얼마, "코드는" → 코드); question words and one-letter stems are none.
Presence is :func:`gateway.answers.support.present` (an opening of three fifths of the term in the
squashed text). A term neither the passages nor the cached question hold (a synonym, "초봉") is let
through when nothing the passages hold was dropped. A false hit costs a wrong answer, a refusal only
an LLM call.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from gateway.answers import support
from services.runtime.korean.numbers import native_at

# Endings after a noun: particles, the copula, and 하다/되다 (the noun before them is the term).
NOUN_ENDINGS = sorted({
    "은", "는", "이", "가", "을", "를", "에", "에서", "에게", "께", "의", "로", "으로", "와", "과", "도", "만", "까지",
    "부터", "한테", "이나", "이랑", "랑", "처럼", "보다", "마다", "밖에", "이라도", "라도", "이란", "란",
    "인가요", "인가", "인지", "일까", "일까요", "인데", "인데요", "이에요", "예요", "에요", "입니다", "이며", "이면",
    "면",
    "하나요", "한가요", "할까요", "했나요", "합니다", "해요", "하고", "하면", "해야", "하는", "한", "할", "했는데",
    "하려면", "되나요", "될까요", "됩니다", "돼요", "된", "되는", "될", "됐는데", "되면", "되려면",
}, key=len, reverse=True)
# Endings of a verb or adjective: the word is a predicate, not a term.
PREDICATE_ENDINGS = ("나요", "까요", "는데", "니다", "려면", "어요", "아요", "세요", "지요", "죠", "요")


def terms(text: str) -> list[str]:
    """The question's nouns (stems), in order, each once; see the module."""
    out: list[str] = []
    for raw in support.WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        if any(c.isdigit() for c in raw) or raw in support.STOP:
            continue  # numbers are compared as values
        word = raw
        for _ in range(2):  # 하다 then the copula at most ("주문하면", "책인가요")
            ending = next((e for e in NOUN_ENDINGS if len(word) > len(e) and word.endswith(e)), "")
            if not ending:
                break
            word = word[: -len(ending)]
        if word == raw and raw.endswith(PREDICATE_ENDINGS):
            continue
        if len(word) >= 2 and word not in support.STOP and word not in out:
            out.append(word)
    return out


def question_numbers(text: str) -> set[str]:
    """The numbers of a question as ``value+unit``: digits and Sino-Korean ones, and native ones before a unit."""
    text = unicodedata.normalize("NFKC", text)
    out = set(support.numbers(text))
    for m in re.finditer(r"[가-힣]+", text):
        native = native_at(text, m.start())
        if native is None:
            continue
        value, end = native
        unit = support.UNIT.match(text, end)
        if unit is not None:
            out.add(f"{value:g}{support.UNIT_SAME.get(unit['u'], unit['u'])}")
    return out


# Question words by the kind of answer they ask for (Korean grammar's closed set of interrogatives).
_ASKS = re.compile(r"(?P<place>어디|어느\s*곳)|(?P<person>누구|누가)|(?P<when>언제)|(?P<amount>얼마)"
                   r"|(?P<days>며칠)|(?P<count>몇)|(?P<what>무엇|뭐|뭘|무슨|어떤|어떻게|어느|왜)")


@functools.lru_cache(maxsize=1024)
def asks(text: str) -> tuple[object, ...]:
    """What kind of answer ``text`` asks for: its question words by class, and the type read by grammar.

    Cached: a lookup compares the new question with every close stored one, and reading runs Kiwi.
    """
    from gateway.answers.question import read

    text = unicodedata.normalize("NFKC", text)
    classes = sorted({m.lastgroup or "" for m in _ASKS.finditer(text)})
    asked = read(text)
    return tuple(classes), asked.kind, asked.unit, asked.counter


def same_need(new: str, cached: str, passages: str, cited: str) -> str | None:
    """None when ``new`` asks what ``cached`` asked (see the module); else the rule refusing it.

    ``passages``: the text the cached answer was written from; ``cited``: the sentences it cites.
    """
    if question_numbers(new) != question_numbers(cached):
        return "numbers"
    if asks(new) != asks(cached):
        return "asks"
    new_sq, cached_sq, passages_sq, cited_sq = (support.squash(t) for t in (new, cached, passages, cited))
    added = [t for t in terms(new) if not support.present(t, cached_sq)]
    if any(support.present(t, passages_sq) and not support.present(t, cited_sq) for t in added):
        return "new_term"
    dropped = [t for t in terms(cached) if not support.present(t, new_sq)]
    if added and any(support.present(t, passages_sq) for t in dropped):
        return "replaced_term"
    return None
