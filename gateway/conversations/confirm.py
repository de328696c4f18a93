"""From a finished gift conversation to the confirm screen (seed 004): display keywords, a summary, a reply.

Pure functions; the serving layer (gateway/conversations/finish.py) makes the calls.

- **Display keywords** are chosen by code from the profile: who and what for, the wanted categories,
  the must-have attributes, the turns' own keywords (less those taken back), the budget as a phrase,
  then what is left out ("가죽 제외"); at most :data:`MAX_KEYWORDS`, each once.
- **The summary** is the response model's (a few sentences a friend could read); code keeps it only
  when every number in it is one of the profile's (the budget, a number its words hold) and every
  recipient, occasion, category or attribute it names is the profile's — a left-out one only beside
  a refusal ("가죽은 빼고"). Otherwise the summary is ``null`` with the reason.
- **The reply on a turn** asks for what the profile still lacks; code picks the missing fields
  (:func:`missing`), the model only phrases the question, and the same check holds it to the profile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from gateway.conversations.reading import CUE, REFUSAL, Vocabulary
from gateway.conversations.slots import GENERIC, _listed
from services.runtime.korean.gifts import OCCASIONS, RECIPIENTS
from services.runtime.korean.numbers import numbers
from services.runtime.korean.particles import ends_word, starts_word

MAX_KEYWORDS = 8
SUMMARY_CHARS = 70  # the grammar's cap; SUMMARY_TOKENS covers it (a Korean character: 1-2 tokens)
SUMMARY_TOKENS = 2 * SUMMARY_CHARS + 16
# A refusal in the few characters after a word: the profile's refusal words and its cues of a thing
# already had, given, bought elsewhere or not used (이미 가지고 있어, 지난번에 줬어), or a negation by
# grammar (드시지 않는, 넣지 말고, 알코올 없는, 와인 대신).
REFUSED_NEAR = re.compile(r"^[^.!?\n]{0,16}?(?:" + REFUSAL + "|" + CUE + r"|지\s*(?:않|말)|없(?:는|이|고|어)|대신)")
SPACED_UNIT = re.compile(r"(\d)\s+(?=[십백천만억조])")  # "40 만 원" as "40만 원"
FIELDS_ASKED = {"recipient": "누구에게 줄 선물인지", "occasion": "어떤 날이나 계기의 선물인지",
                "budget": "예산이 얼마인지"}


def won(value: int) -> str:
    """An amount as people write it: 150000 → "15만 원", 1500000 → "150만 원", 12500 → "12,500원"."""
    if value % 10000 == 0:
        return f"{value // 10000:,}만 원"
    return f"{value:,}원"


def budget_phrase(profile: dict[str, Any]) -> str | None:
    """The budget as a keyword: "10만 원 이하", "5만~10만 원", "3만 원 이상"; None when there is none."""
    low, high = profile.get("budget_min"), profile.get("budget_max")
    if low is not None and high is not None:
        return f"{won(low).removesuffix(' 원')}~{won(high)}" if low != high else won(high)
    if high is not None:
        return f"{won(high)} 이하"
    if low is not None:
        return f"{won(low)} 이상"
    return None


def keywords(profile: dict[str, Any], limit: int = MAX_KEYWORDS) -> list[str]:
    """The confirm screen's keywords, in the order a person reads a request: who, why, what, how much, not what."""
    taken_back = set(profile.get("excluded_keywords") or [])
    out: list[str] = []
    wanted = [profile.get("recipient"), profile.get("occasion"), *profile.get("categories", []),
              *profile.get("must_have", []), *(k for k in profile.get("keywords", []) if k not in taken_back),
              budget_phrase(profile)]
    left_out = [f"{w} 제외" for w in (*profile.get("excluded_categories", []), *profile.get("forbidden", []))]
    for word in (*wanted, *left_out):
        if not word or word in GENERIC or word in out or any(word in o for o in out):
            continue
        if len(word.split()) > 1 and all(any(t in o for o in out) for t in word.split()):
            continue  # "엄마 어버이날" once both words are shown
        out.append(word)
    return out[:limit]


def missing(profile: dict[str, Any]) -> list[str]:
    """What a gift search still lacks, in the order to ask: recipient, occasion, budget."""
    out = [f for f in ("recipient", "occasion") if not profile.get(f)]
    if profile.get("budget_min") is None and profile.get("budget_max") is None:
        out.append("budget")
    return out


def profile_lines(profile: dict[str, Any]) -> str:
    """The profile as the model reads it (Korean labels, only what is set)."""
    rows = [("받는 사람", profile.get("recipient")), ("계기", profile.get("occasion")),
            ("예산", budget_phrase(profile)), ("원하는 종류", ", ".join(profile.get("categories", []))),
            ("꼭 있어야 할 것", ", ".join(profile.get("must_have", []))),
            ("키워드", ", ".join(k for k in profile.get("keywords", [])
                              if k not in set(profile.get("excluded_keywords") or []))),
            ("빼야 할 종류", ", ".join(profile.get("excluded_categories", []))),
            ("빼야 할 속성", ", ".join(profile.get("forbidden", [])))]
    return "\n".join(f"- {label}: {value}" for label, value in rows if value)


SUMMARY_SYSTEM = ("선물 요청을 친구에게 보여 줄 요약문으로 씁니다. 주어진 항목만 써서 60자 이내의 한 문장으로 "
                  "자연스럽게 쓰고, 항목에 없는 사람, 날, 금액, 물건은 쓰지 마세요. JSON으로만 답하세요.")
SUMMARY_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["summary"],
                  "properties": {"summary": {"type": "string", "maxLength": SUMMARY_CHARS}}}
REPLY_SYSTEM = ("선물 고르기를 돕는 점원처럼 짧고 따뜻하게 한국어 한 문장으로 답합니다. 지금까지 들은 내용을 "
                "지어내지 말고, 물어보라는 것만 물어보세요. 예시 금액이나 숫자는 쓰지 마세요.")


Role = Literal["system", "user"]


def summary_messages(profile: dict[str, Any]) -> list[tuple[Role, str]]:
    """(role, text) of the summary call."""
    return [("system", SUMMARY_SYSTEM), ("user", f"[선물 요청]\n{profile_lines(profile)}")]


def reply_messages(profile: dict[str, Any], asked: list[str], text: str) -> list[tuple[Role, str]]:
    """(role, text) of a turn's reply: what the person said, the profile, and what code decided to ask."""
    ask = (" 그리고 ".join(FIELDS_ASKED[f] for f in asked) + "를 물어보세요.") if asked else \
        "필요한 내용은 다 모였으니, 확인하고 추천을 받아 보라고 안내하세요."
    known = profile_lines(profile) or "- (아직 없음)"
    return [("system", REPLY_SYSTEM), ("user", f"손님의 말: {text}\n[지금까지 들은 내용]\n{known}\n{ask}")]


def allowed_numbers(profile: dict[str, Any], also: Iterable[str] = ()) -> set[float]:
    """The numbers a text about the profile may hold: the budget's and those its words (and ``also``) write."""
    out = {float(v) for v in (profile.get("budget_min"), profile.get("budget_max")) if v is not None}
    words = [profile.get("recipient") or "", profile.get("occasion") or "", *profile.get("categories", []),
             *profile.get("must_have", []), *profile.get("keywords", []), *also]
    for word in words:
        out |= {n.value for n in numbers(word)}
    return out


def unfaithful(text: str, profile: dict[str, Any], vocab: Vocabulary, also: Iterable[str] = ()) -> list[str]:
    """Why ``text`` says something the profile does not (empty: every number and name is the profile's).

    ``also``: more text the check may draw on (a reason's items: their names and categories).
    """
    problems: list[str] = []
    also = list(also)
    allowed = allowed_numbers(profile, also)
    squeezed = SPACED_UNIT.sub(r"\1", text)
    for n in numbers(squeezed):
        if n.value not in allowed and not any(abs(n.value - a) < 0.5 for a in allowed):
            problems.append(f"the number {squeezed[n.start:n.end]!r} is not the profile's")
    for key, words in (("recipient", RECIPIENTS), ("occasion", OCCASIONS)):
        own = profile.get(key) or ""
        for word in _listed(tuple(sorted(words, key=len, reverse=True)), text):
            if any(word in a for a in also):
                continue  # the items' own words (아이용, 생일 케이크)
            if not own or (word not in own and own not in word):
                problems.append(f"{key} {word!r} is not the profile's ({own or 'none'})")
    wanted = {*profile.get("categories", []), *profile.get("must_have", []), *profile.get("keywords", [])}
    left_out = {*profile.get("excluded_categories", []), *profile.get("forbidden", [])}
    for word in (*vocab.categories, *vocab.attributes):
        for match in re.finditer(re.escape(word), text):
            if not (starts_word(text, match.start()) and ends_word(text, match.end())):
                continue  # inside another word (향 of 향수, 꽃 of 꽃다발)
            if word in left_out:
                if not REFUSED_NEAR.search(text[match.end():]):
                    problems.append(f"{word!r} is left out of the profile but the text does not say so")
            elif word not in wanted and not any(word in a for a in also):
                problems.append(f"{word!r} is not in the profile")
    return list(dict.fromkeys(problems))


_TITLE_WORD = re.compile(r"[가-힣]{2,}")
_SHARED = frozenset("선물 세트 상품 제품 구성 포함 좋은 위한 함께".split())


def off_items(text: str, titles: list[str], profile: dict[str, Any]) -> list[str]:
    """Why a list's per-query reason is not about the items it stands under (empty: it is; issue 81).

    It must describe every item (a word of at least two letters of each title, its first two letters
    enough: 머스크 of 머스크 향의), and it must not dwell on what was left out — praising an exclusion
    ("도서를 빼는 것은 …") is no reason to buy what is shown.
    """
    problems: list[str] = []
    said = {w[:2] for w in _TITLE_WORD.findall(text)}
    for title in titles:
        own = {w[:2] for w in _TITLE_WORD.findall(title) if w not in _SHARED}
        if own and not own & said:
            problems.append(f"the reason does not describe {title[:20]!r}")
    for word in (*profile.get("excluded_categories", []), *profile.get("forbidden", [])):
        if word and word in text:
            problems.append(f"the reason talks about {word!r}, which was left out")
    return problems
