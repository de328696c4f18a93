"""Checks a recommendation reason must pass before a user reads it.

A reason must be about its own item and the query, in Korean, of a sensible length, and must not be:

- ``copy``: the item's own title/description copied (character n-gram containment of the reason
  in the item's text, n-grams of the query excluded, over ``copy_containment``), or the prompt's own
  instruction echoed (a reason containing words only the prompt uses: ``short``, ``쓰세요``, ...), or
  nothing but the query (the query itself, or only its words, particles aside: 요리가 좋아하는 어머니
  for 요리를 좋아하는 어머니), or the prompt's worked example copied (containment in the example's
  items and reasons over ``copy_containment``, n-grams of the query and of the item's own text
  excluded: a small model wrote the example's camping-chair reason for a wedding-anniversary scarf);
- ``foreign_item``: a name or fact of another item of the list (a distinctive word of another
  item's title or description that is neither in this item's text nor in the query);
- ``not_korean``: Hangul under ``min_hangul_share`` of the letters, or a letter of another script
  than Hangul, Latin or Hanja inside (어머ニ, 어머ни: the small model's slips);
- ``length``: outside the short / long character bounds;
- ``duplicate``: short and long saying the same thing (containment either way);
- ``repetition``: one phrase (``repeat_chars`` characters, spaces and punctuation ignored) twice
  within one reason.

Every check is plain string arithmetic, cheap enough to run on every card of every answer.
``copy_containment`` was chosen on ``bench/data/reasoning_checks_tune.json`` and is reported on
``bench/data/reasoning_checks_eval.json`` (``python -m bench.llm_select --checks-only``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from services.reasoning.prompts import REASONS_EXAMPLE_TEXTS
from services.runtime.korean.particles import WORD_ENDINGS, strip_particle

VIOLATION_KINDS = ("copy", "foreign_item", "not_korean", "length", "duplicate", "repetition",
                   # substance (services/reasoning/substance.py, issue 81): what a shopper would read
                   "no_property", "no_fit", "contradicts", "same_as_other")

# Words every reason may use whichever item it is about (the recommendation's own vocabulary).
_GENERIC = frozenset("선물 추천 상품 제품 사용 가능 좋은 좋습니다 있는 위한 함께 분께 사람 구성 세트 활용 "
                     "가격 원 만원 정도 하나 모두 제격 어울리는 필요 준비".split())
_WORD = re.compile(r"[가-힣]+|[a-z0-9]+")
# Normalised words of the reasons prompt's instructions that no reason has a use for: a reason holding
# one repeats the instruction, or a regeneration's note, instead of answering it (seen from the 0.5B model).
PROMPT_ECHOES = ("short", "long", "쓰세요", "왜맞는지", "이름과정보", "고칠점", "그대로옮겼", "다른상품의내용",
                 "되풀이했", "되풀이합")


@dataclass(frozen=True)
class CheckRules:
    """Thresholds of the checks (see the module doc)."""

    copy_containment: float = 0.45  # tuned on bench/data/reasoning_checks_tune.json (the example's copy uses it too)
    ngram: int = 3
    min_hangul_share: float = 0.6
    short_chars: tuple[int, int] = (8, 50)
    long_chars: tuple[int, int] = (25, 160)
    duplicate_containment: float = 0.8
    repeat_chars: int = 12
    foreign_min_chars: int = 2


@dataclass(frozen=True)
class Finding:
    """One broken rule: its kind, the field (short / long / both) and a detail the model is told."""

    kind: str
    field: str
    detail: str


def normalise(text: str) -> str:
    """Lower-case NFC text with only Hangul syllables, Latin letters and digits kept."""
    text = unicodedata.normalize("NFC", text).lower()
    return "".join(c for c in text if "가" <= c <= "힣" or c.isascii() and c.isalnum())


def ngrams(text: str, n: int) -> set[str]:
    """Character n-grams of normalised text (the whole text when it is shorter than n)."""
    if len(text) < n:
        return {text} if text else set()
    return {text[i:i + n] for i in range(len(text) - n + 1)}


@lru_cache(maxsize=8)
def texts_ngrams(texts: tuple[str, ...], n: int) -> frozenset[str]:
    """The n-grams of several texts together (cached: the worked example's are the same for every card)."""
    return frozenset().union(*(ngrams(normalise(t), n) for t in texts))


def containment(part: str, whole_grams: set[str] | frozenset[str], n: int, exclude: set[str] | None = None) -> float:
    """Share of ``part``'s n-grams found in ``whole_grams`` (those in ``exclude`` count as not found)."""
    grams = ngrams(normalise(part), n)
    if not grams:
        return 0.0
    found = grams & whole_grams
    if exclude:
        found -= exclude
    return len(found) / len(grams)


def hangul_share(text: str) -> float:
    """Hangul syllables among all letters (1.0 for text without letters)."""
    letters = [c for c in text if c.isalpha()]
    return sum("가" <= c <= "힣" for c in letters) / len(letters) if letters else 1.0


def _stem(word: str) -> str:
    return strip_particle(word, WORD_ENDINGS, keep=2)


def distinctive_words(text: str, min_chars: int) -> set[str]:
    """Words of ``text`` (particles cut) that can name an item: at least ``min_chars`` long, not generic."""
    found = set(words(re.sub(r"(?<=\d),(?=\d)", "", text)))  # 49,000 -> 49000
    return {w for w in found if len(w) >= min_chars and w not in _GENERIC}


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, particles cut."""
    return [_stem(w) for w in _WORD.findall(unicodedata.normalize("NFC", text).lower())]


def other_script(text: str) -> str:
    """The letters of ``text`` that are neither Hangul, Latin nor Hanja (kana, Cyrillic …), in order."""
    return "".join(c for c in text if c.isalpha() and not (
        "가" <= c <= "힣" or "\u1100" <= c <= "\u11ff" or "\u3130" <= c <= "\u318f"  # syllables, jamo
        or c.isascii() or "\u4e00" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff"))  # Latin; Hanja


def repeated_phrase(text: str, k: int) -> str:
    """A run of ``k`` normalised characters that occurs twice without overlap, or ''."""
    s = normalise(text)
    for i in range(len(s) - 2 * k + 1):
        if s.find(s[i:i + k], i + k) >= 0:
            return s[i:i + k]
    return ""


def check_reason(short: str, long: str, *, title: str, description: str, query: str,
                 others: list[tuple[str, str]], rules: CheckRules = CheckRules(),
                 examples: tuple[str, ...] = REASONS_EXAMPLE_TEXTS) -> list[Finding]:
    """Every rule one card's reasons break (empty: the card may be shown).

    ``examples``: the texts of the prompt's worked example, which no card may copy.
    """
    out: list[Finding] = []
    own = normalise(f"{title} {description}")
    own_grams = ngrams(own, rules.ngram)
    query_norm = normalise(query)
    query_grams = ngrams(query_norm, rules.ngram)
    query_words = set(words(query))
    example_grams = texts_ngrams(examples, rules.ngram)
    texts = {"short": short, "long": long}
    for name, text in texts.items():
        norm = normalise(text)
        share = containment(text, own_grams, rules.ngram, exclude=query_grams)
        if share > rules.copy_containment or (len(norm) >= 6 and norm in own):
            out.append(Finding("copy", name, f"{name}가 상품명·설명을 그대로 옮겼습니다 (겹침 {share:.0%})"))
        elif len(norm) >= 4 and (norm in query_norm or set(words(text)) <= query_words):
            out.append(Finding("copy", name, f"{name}가 검색어를 그대로 옮겼습니다. 이 상품이 맞는 이유를 쓰세요"))
        elif any(echo in norm for echo in PROMPT_ECHOES):
            out.append(Finding("copy", name, f"{name}가 지시문을 그대로 옮겼습니다. 이유만 쓰세요"))
        elif (example := containment(text, example_grams, rules.ngram, exclude=query_grams | own_grams)) \
                > rules.copy_containment:
            out.append(Finding("copy", name,
                               f"{name}가 예시 답을 옮겼습니다 (겹침 {example:.0%}). 이 상품에 대해 쓰세요"))
    foreign = set()
    for other_title, other_description in others:
        for word in distinctive_words(f"{other_title} {other_description}", rules.foreign_min_chars):
            if word not in own and word not in query_norm and word in normalise(f"{short} {long}"):
                foreign.add(word)
    if foreign:
        out.append(Finding("foreign_item", "both", "다른 상품의 내용을 썼습니다: " + ", ".join(sorted(foreign)[:5])))
    share = hangul_share(short + long)
    stray = other_script(short + long)
    if share < rules.min_hangul_share:
        out.append(Finding("not_korean", "both", f"한국어가 아닙니다 (한글 {share:.0%})"))
    elif stray:
        out.append(Finding("not_korean", "both", f"한글 사이에 다른 문자가 섞였습니다 ('{stray[:5]}')"))
    for name, (low, high) in (("short", rules.short_chars), ("long", rules.long_chars)):
        n = len(texts[name].strip())
        if not low <= n <= high:
            out.append(Finding("length", name, f"{name}는 {low}~{high}자여야 합니다 (지금 {n}자)"))
    short_grams = ngrams(normalise(short), rules.ngram)
    long_grams = ngrams(normalise(long), rules.ngram)
    if short_grams and long_grams and max(len(short_grams & long_grams) / len(short_grams),
                                          len(short_grams & long_grams) / len(long_grams)) >= \
            rules.duplicate_containment:
        out.append(Finding("duplicate", "both", "long이 short를 되풀이합니다"))
    for name, text in texts.items():
        phrase = repeated_phrase(text, rules.repeat_chars)
        if phrase:
            out.append(Finding("repetition", name, f"{name}에서 같은 구절을 되풀이했습니다 ('{phrase}')"))
    return out
