"""Amounts of money as Korean writes them, read by grammar: ``5만 원 이하``, ``오만 원``, ``3억5천``, ``10만원대``.

:func:`amounts` finds every amount in a text (numbers from numbers.py) with its currency, when one is
written or implied by a Korean large unit, and the bound a word after it sets (``이하`` at most,
``이상`` at least, ``정도`` about, ``대`` a range). :func:`currencies` finds the currencies a text names,
and which one it converts *to* (``달러로``).

Stated rules (not fitted to data):

- a number is money when a currency word or sign is written with it, or when it holds a Korean large
  unit (``5만``, ``3억5천``: won, most likely, though not written) and is written with digits;
- a number written only in Sino-Korean numerals (``오만``, ``이만``, ``천``) is money only with a currency
  word: alone it is mostly a word (오만하다, 이만 가볼게요, 천천히);
- a number followed by a counter (명, 개, 회, 보, 점, 건, 시간, km …) or glued to Latin letters (``500ml``)
  counts something else, and is no amount;
- a one-syllable currency word (원, 엔, 불) counts only where a particle, a bound word or no letter
  follows it (``5만 원짜리``; not ``8 엔진``);
- ``대`` after an amount is the range of its last written digit: ``10만원대`` is 100,000-199,999,
  ``15만원대`` 150,000-159,999.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.runtime.korean.numbers import Number, numbers
from services.runtime.korean.particles import ends_word

# Currency words and signs -> ISO code.
CURRENCY_WORDS = {
    "원": "KRW", "₩": "KRW", "krw": "KRW", "won": "KRW",
    "달러": "USD", "불": "USD", "$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
    "유로": "EUR", "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "엔": "JPY", "¥": "JPY", "jpy": "JPY", "yen": "JPY",
    "위안": "CNY", "元": "CNY", "cny": "CNY", "yuan": "CNY",
    "파운드": "GBP", "£": "GBP", "gbp": "GBP",
}
SIGNS = "$€¥£₩"
_CUR = "|".join(sorted((re.escape(w) for w in CURRENCY_WORDS if w not in SIGNS), key=len, reverse=True))
_CUR_AFTER = re.compile(rf"\s?(?P<cur>{_CUR})(?![a-z])", re.IGNORECASE)
# Counters: a number before one counts people, things, times, lengths ... — not money.
COUNTERS = tuple("""
명 개 회 번 시간 분 초 년 개월 달 주 일 살 세 점 권 장 잔 병 마리 보 건 곳 층 호 배 위 등 차 평 인 대 통 벌 켤레 송이
포기 알 줄 칸 채 쌍 박스 팩 세트 인분 그릇 가지 군데 표 부 편 곡 페이지 쪽 킬로 키로 미터 리터 그램 퍼센트 프로 %
배속 명분 학년 학기 단계 시
""".split())
_COUNTER = re.compile(r"\s?(?:" + "|".join(re.escape(c) for c in sorted(COUNTERS, key=len, reverse=True))
                      + r"|[A-Za-z]+)")
MAX_WORDS = ("이하", "이내", "미만", "까지", "안쪽", "아래", "밑")
MIN_WORDS = ("이상", "넘는", "넘게", "넘어", "초과", "부터")
ABOUT_WORDS = ("정도", "쯤", "내외", "안팎", "가량", "남짓", "언저리", "선", "전후")
_BOUND_WORDS = "|".join(sorted(MAX_WORDS + MIN_WORDS + ABOUT_WORDS, key=len, reverse=True))
_TAIL = re.compile(rf"\s*+(?:짜리\s*+)?(?P<w>{_BOUND_WORDS})")
_RANGE = re.compile(r"대(?![가-힣])|대(?=[로의에가는를도이])")
_TO = re.compile(rf"(?P<cur>{_CUR}|[{re.escape(SIGNS)}])\s*+(?:화\s*+)?(?:으로|로)(?![가-힣])", re.IGNORECASE)


@dataclass(frozen=True)
class Amount:
    """One amount: its value in its currency (None: not written), the bound a word sets, where it was.

    ``bound`` is "max", "min", "about", "range" (then ``high`` is the range's top) or None.
    """

    value: float
    currency: str | None
    bound: str | None
    start: int
    end: int
    lead: float  # the first number as written ("5" of "5만 원"): what a model that dropped the unit gives
    high: float | None = None

    @property
    def integer(self) -> int | None:
        """The value as an int when it is whole."""
        return int(self.value) if float(self.value).is_integer() else None


def _currency_after(text: str, at: int) -> tuple[str, int] | None:
    m = _CUR_AFTER.match(text, at)
    if not m:
        return None
    word = m["cur"].lower()
    if len(word) == 1 and word in "원엔불" and not ends_word(text, m.end(), bound=True):
        return None  # 엔진, 원하는, 불가능: another word
    return CURRENCY_WORDS[word], m.end()


def _range_top(value: float) -> float:
    """The top of ``value``'s 대 range: the place of its last nonzero digit, less one (10만 -> 199,999)."""
    if value <= 0 or not float(value).is_integer():
        return value
    v = int(value)
    place = 1
    while v % (place * 10) == 0:
        place *= 10
    return v + place - 1


def _amount(text: str, n: Number) -> Amount | None:
    pre = n.start - 1 if n.start > 0 and text[n.start - 1] in SIGNS else None
    if pre is None and n.start > 1 and text[n.start - 1] == " " and text[n.start - 2] in SIGNS:
        pre = n.start - 2
    currency = CURRENCY_WORDS[text[pre]] if pre is not None else None
    end = n.end
    after = _currency_after(text, end) if currency is None else None
    if after is not None:
        currency, end = after
    if currency is None:
        if not n.large or n.hangul:
            return None  # "3권", "2026년", "이만 가볼게요": a number or a word, not an amount
        if _COUNTER.match(text, end) and not _TAIL.match(text, end) and not _RANGE.match(text, end):
            return None  # "팔로워 3천명", "1만 보": a count
    bound: str | None = None
    high: float | None = None
    if _RANGE.match(text, end):
        bound, high = "range", _range_top(n.value)
        end += 1
    else:
        tail = _TAIL.match(text, end)
        if tail:
            w = tail["w"]
            bound = "max" if w in MAX_WORDS else "min" if w in MIN_WORDS else "about"
            end = tail.end()
    return Amount(n.value, currency, bound, pre if pre is not None else n.start, end, n.lead, high)


def amounts(text: str) -> list[Amount]:
    """Every amount of money in ``text``, in order."""
    out = []
    for n in numbers(text, _CUR_AFTER, signs=SIGNS):
        a = _amount(text, n)
        if a is not None:
            out.append(a)
    return out


def currencies(text: str) -> tuple[list[str], str | None]:
    """The currencies ``text`` names, in order (each once), and the one it converts to (``달러로``), if any.

    A one-syllable currency word (원, 엔, 불) counts only in an amount or as ``원화``/``엔화`` or
    before ``(으)로``: alone it is mostly another word (원하는, 엔진, 불가능).
    """
    found: list[tuple[int, str]] = [(a.start, a.currency) for a in amounts(text) if a.currency]
    for m in re.finditer(rf"{_CUR}|[{re.escape(SIGNS)}]", text, re.IGNORECASE):
        word = m.group().lower()
        code = CURRENCY_WORDS.get(word)
        if code is None:
            continue
        if word.isascii() and word.isalpha() and (m.start() > 0 and text[m.start() - 1].isalpha()
                                                  or m.end() < len(text) and text[m.end()].isalpha()):
            continue  # "eur" of "europe", "won" of "wonder"
        if len(word) == 1 and word in "원엔불" and not re.match(r"화|\s*+(?:으로|로)(?![가-힣])", text[m.end():]):
            continue
        found.append((m.start(), code))
    seen: list[str] = []
    for _, code in sorted(found):
        if code not in seen:
            seen.append(code)
    to = _TO.search(text)
    return seen, CURRENCY_WORDS.get(to["cur"].lower()) if to else None
