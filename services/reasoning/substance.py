"""Whether a recommendation reason says something a shopper would read (issue 81), by code.

The form checks (services/reasoning/checks.py) pass "부모님께 가족의 생일을 맞추는 선물" for a card wallet
sold to men in their thirties, and "검색어와 가까운 선물" says nothing. A reason is of substance when:

- ``no_property``: it names a property of **this** item — a word of its own text or attributes that the
  other items shown with it do not share and the query does not bring (what tells it apart);
- ``no_fit``: it ties the item to what the query asks — one of the query's content words (a stem of two
  letters or more), or a word of the same class the query names (a kin or role word for a recipient, an
  occasion word for an occasion: 엄마 → 어머니, 생신 → 생일 are the same facet);
- ``contradicts``: it addresses someone the item is not for — a man's item offered to a woman (or the
  reverse), an item for people in their 20s or 30s or for children offered to parents or grandparents.

Plain string arithmetic over words, with Kiwi nowhere on the path; each kind is named in the card's
``violations`` and in the regeneration's note.
"""

from __future__ import annotations

import re

from services.reasoning.checks import Finding, normalise, words
from services.runtime.korean.gifts import OCCASIONS, RECIPIENTS

# Words any reason or query uses whatever the item: never a property, never a fit.
_PLAIN = frozenset("선물 추천 상품 제품 사용 가능 좋은 좋습니다 있는 위한 함께 분께 사람 구성 세트 활용 가격 원 만원 "
                   "정도 하나 모두 제격 어울리는 필요 준비 이하 이상 이내 안쪽 까지 대 주세요 찾아 찾는 좋을 뭐가 어떤 "
                   "category price tags in_stock true false".split())
_MALE = frozenset("남편 아빠 아버지 남자친구 남친 아들 오빠 형 형님 삼촌 외삼촌 할아버지 외할아버지 시아버지 장인 "
                  "장인어른 처남 남동생 손자 사위 매형 형부".split())
_FEMALE = frozenset("아내 와이프 엄마 어머니 여자친구 여친 딸 언니 누나 할머니 외할머니 시어머니 장모님 이모 고모 "
                    "며느리 여동생 손녀 올케 처제 처형".split())
_ELDER = frozenset("부모님 어머니 아버지 엄마 아빠 할머니 할아버지 외할머니 외할아버지 시어머니 시아버지 장인 장인어른 "
                   "장모님 시부모님".split())
_ITEM_MALE = re.compile(r"남성|남자(?!친구)")
_ITEM_FEMALE = re.compile(r"여성|여자(?!친구)")
_ITEM_YOUNG = re.compile(r"[23]0대|어린이|아이용|유아|아동|키즈")


def _kin(text: str) -> set[str]:
    """Kin and role words ``text`` writes at a word's start (여동생 holds 동생)."""
    return {w for w in RECIPIENTS if re.search(rf"(?<![가-힣])[가-힣]?{re.escape(w)}", text)} \
        | {w for w in _MALE | _FEMALE if re.search(rf"(?<![가-힣]){re.escape(w)}", text)}


def _occasions(text: str) -> set[str]:
    return {w for w in OCCASIONS if len(w) >= 2 and w in text}


def _stems(text: str) -> set[str]:
    """Two-letter stems of ``text``'s content words (생일 of 생일에, 면접 of 면접을)."""
    return {w[:2] for w in words(text) if len(w) >= 2 and w not in _PLAIN}


def properties(title: str, description: str, others: list[tuple[str, str]], query: str) -> set[str]:
    """The stems of this item's own words that the other items shown do not share and the query does not bring."""
    theirs = set().union(*(_stems(f"{t} {d}") for t, d in others)) if others else set()
    return _stems(f"{title} {description}") - theirs - _stems(query)


def apart_words(title: str, description: str, others: list[tuple[str, str]], query: str, limit: int = 3) -> list[str]:
    """The item's title words that tell it apart from the others shown (for the prompt), at most ``limit``."""
    own = properties(title, description, others, query)
    return list(dict.fromkeys(w for w in words(title) if len(w) >= 2 and w[:2] in own))[:limit]


def substance(short: str, long: str, *, title: str, description: str, query: str,
              others: list[tuple[str, str]]) -> list[Finding]:
    """The substance rules ``short`` and ``long`` together break (see the module doc)."""
    reason = f"{short} {long}"
    said = _stems(reason)
    out: list[Finding] = []
    own = properties(title, description, others, query)
    if own and not said & own:
        named = ", ".join(sorted(w for w in words(title) if w[:2] in own)[:4])
        out.append(Finding("no_property", "both", f"이 상품만의 특징을 하나 쓰세요 (예: {named})"))
    asked = _stems(query)
    kin_q, kin_r = _kin(query), _kin(reason)
    occasion_q, occasion_r = _occasions(query), _occasions(reason)
    if asked and not (said & asked or kin_q and kin_r or occasion_q and occasion_r):
        out.append(Finding("no_fit", "both", f"검색한 사람의 요청({query[:30]})에 왜 맞는지 쓰세요"))
    wrong = contradicted(f"{title} {description}", kin_r)
    if wrong:
        whom = ", ".join(sorted(wrong))
        out.append(Finding("contradicts", "both", f"상품의 대상과 맞지 않는 사람({whom})에게 권했습니다"))
    return out


def contradicted(item: str, kin: set[str]) -> set[str]:
    """The kin words of ``kin`` the item is not for: a man's item and a woman, an item for the young and elders."""
    wrong: set[str] = set()
    if _ITEM_MALE.search(item) and not _ITEM_FEMALE.search(item):
        wrong |= kin & _FEMALE
    if _ITEM_FEMALE.search(item) and not _ITEM_MALE.search(item):
        wrong |= kin & _MALE
    if _ITEM_YOUNG.search(item):
        wrong |= kin & _ELDER
    return wrong


def same_reason(short: str, shown: list[str]) -> Finding | None:
    """A card whose short reason another card on the same screen already shows (spaces and marks ignored)."""
    key = normalise(short)
    if key and key in {normalise(s) for s in shown}:
        return Finding("same_as_other", "short", "다른 상품과 같은 이유입니다. 이 상품만의 이유를 쓰세요")
    return None
