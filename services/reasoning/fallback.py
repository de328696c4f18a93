"""A reason written by code when the model's fails its checks twice: short, factual, marked ``source: rule``.

It says only what code can see: the query's recipient and occasion, the item's own first phrase, its
attributes the query names, its category and its price against the budget the query writes (``5만 원
이하``, read by services/runtime/korean). It never claims more than that, so it needs no checks; a
backend shows it or hides it by ``source``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from prometheus_client import Counter

from services.reasoning.cards import ItemIn, ReasonOut
from services.reasoning.substance import _FEMALE, _MALE, contradicted
from services.runtime.korean.amounts import amounts
from services.runtime.korean.gifts import facets
from services.runtime.korean.particles import WORD_ENDINGS, strip_particle

RULE_REASONS = Counter("mesh_reasoning_rule_reasons_total",
                       "Reason cards written by code after the model's failed its checks twice")
# Words of a query that say what is asked for in general, not what an item must match.
_ASKING = frozenset("추천 추천해 추천해줘 추천해 주세요 선물 상품 제품 찾아 찾는 찾고 좋은 괜찮은 어때 뭐가 무엇 "
                    "주세요 해줘 알려 줘".split())
_FIELD = re.compile(r"(?<![A-Za-z_가-힣])(?P<key>[A-Za-z_가-힣]++)\s*+:\s*+(?P<value>[^,]+)")
CATEGORY_KEYS = ("category", "카테고리", "분류")
PRICE_KEYS = ("price", "가격")


def _batchim(word: str) -> bool:
    last = word[-1] if word else ""
    return "가" <= last <= "힣" and (ord(last) - 0xAC00) % 28 != 0


def _subject(word: str) -> str:
    return "이" if _batchim(word) else "가"


def matched_words(query: str, text: str) -> list[str]:
    """The query's phrases the item's text holds: the longest runs of its words found together, in order.

    ``비 오는 날 읽기 좋은 책`` over ``비 오는 날 읽기 좋은 장편소설`` is ``비 오는 날 읽기 좋은``; a run's last
    word loses its particle; a one-letter word or a word that only asks (추천, 선물) is no phrase alone.
    """
    tokens = re.findall(r"[가-힣A-Za-z0-9]+", query)
    squeezed = re.sub(r"\s+", " ", text)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        best = 0
        phrase = ""
        for j in range(len(tokens), i, -1):
            run = tokens[i:j]
            whole = " ".join(run)
            cut = " ".join(run[:-1] + [strip_particle(run[-1], WORD_ENDINGS, keep=1)])
            phrase = whole if whole in squeezed else cut if cut in squeezed else ""
            if phrase:
                best = j
                break
        if best:
            run = tokens[i:best]
            if (len(run) > 1 or len(phrase) >= 2 and phrase not in _ASKING) and phrase not in out:
                out.append(phrase)
            i = best
        else:
            i += 1
    return out


def fields(description: str) -> dict[str, str]:
    """``key: value`` pairs of an item's description (the gateway sends its payload that way)."""
    return {m["key"].lower(): m["value"].strip() for m in _FIELD.finditer(description)}


def _property(title: str, limit: int) -> str:
    """The item's own first phrase: its title without a leading [label], to the first comma, cut at a word."""
    text = re.sub(r"^\s*\[[^\]]*\]\s*", "", title).split(",")[0].strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut if len(cut) >= limit // 2 else text[:limit]


def rule_reason(query: str, item: ItemIn, violations: tuple[str, ...],
                others: Sequence[ItemIn] = ()) -> ReasonOut:
    """A factual reason for ``item`` (status ``failed``: the model's did not pass; ``source``: ``rule``).

    What code can see: the query's recipient and occasion (the facets it asks about), the item's own first
    phrase (what it is), its attributes the query names, its category, and its price against the budget
    the query writes — "집들이 선물 · 은은한 우디 향 캔들과 디퓨저 · 35,000원, 예산 안". Never a claim of fit
    beyond those facts, and never "close to the query".
    """
    found = fields(item.description)
    category = next((found[k] for k in CATEGORY_KEYS if k in found), "")
    price_text = next((found[k] for k in PRICE_KEYS if k in found), "")
    price = float(price_text.replace(",", "")) if re.fullmatch(r"[\d,]+(?:\.\d+)?", price_text) else None
    tags = [t.strip() for t in re.split(r"[/·]", found.get("tags", "")) if t.strip()]  # "tags: 향/여성용"
    who, why = facets(query)
    fitting = {"여성용": _FEMALE, "남성용": _MALE, "어린이용": frozenset(("조카", "아이", "아기", "아들", "딸"))}
    named_tags = [t for t in tags if t in query or set(who) & fitting.get(t, frozenset())]
    words = matched_words(query, item.title)
    item_text = f"{item.title} {item.description}"
    if contradicted(item_text, set(who)):  # a man's item, asked for a woman (or the like): no claim of fit
        who = []
    facet = " ".join([*who[:1], *why[:1]])
    quoted = ", ".join(f"'{w}'" for w in words[:2])
    head = f"{facet} 선물" if facet else (f"{quoted}에 맞는 {category or '상품'}" if words else
                                        f"{category or '상품'} · '{query[:16].strip()}' 검색 결과")
    budget = [a for a in amounts(query) if a.bound in ("max", "range", "about") and a.currency in (None, "KRW")]
    top = (budget[0].high or budget[0].value) if budget else None
    cost = ""
    if price is not None and price > 0:
        cost = f"{int(price):,}원" + (", 예산 안" if top and price <= top else "")
    room = 50 - len(head) - len(cost) - 6
    short = " · ".join(x for x in (head, _property(item.title, max(room, 8)), cost) if x)[:50]
    long = f"{_property(item.title, 60)}"
    if named_tags:
        long += f"({', '.join(named_tags[:3])})"
    long += f"{'' if not category or category in ('선물', '상품') else ' · ' + category}."
    if words and facet:
        said = ", ".join(repr(w) for w in words[:2])
        long += f" 검색어의 {said}{_subject(words[min(1, len(words) - 1)])} 상품 설명에 있습니다."
    if price is not None and price > 0:
        fits = f"으로 예산 {int(top):,}원 안에 듭니다." if top and price <= top else "입니다."
        long += f" 가격은 {int(price):,}원{fits}"
    if len(long) < 25:
        long += f" '{query[:30].strip()}' 검색에서 찾은 상품입니다."
    RULE_REASONS.inc()
    return ReasonOut(item.id, short[:50], long[:160], "failed", violations, source="rule")
