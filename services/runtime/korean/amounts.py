"""Amounts of money as Korean writes them, read by code: ``5만 원 이하``, ``1억 2천만 원``, ``3천원 정도``, ``$20``.

A small model reads ``5만 원`` as 5,000 (it sees 5 and a unit it half knows); code reads it as
50,000. :func:`amounts` finds every amount in a text with its currency (when one is written or
implied by a Korean unit word), and the bound a word after it sets (``이하`` at most, ``이상`` at
least, ``정도`` about). :func:`currencies` finds the currencies a text names, and which one it asks
to convert *to* (``달러로``).

Stated rules (not fitted to data): Korean large units multiply what is written before them within
one number (``1억 2천만`` is 120,000,000; ``12만5천`` is 125,000); a bare ``만 원`` or ``천 원`` is one
of the unit; digits may carry thousands separators and a decimal part (``1.5만`` is 15,000); a
number without a currency or a Korean large unit is not an amount (``3권``, ``2026년``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNITS = {"천": 1_000, "만": 10_000, "억": 100_000_000, "조": 1_000_000_000_000}
SMALL = {"십": 10, "백": 100, "천": 1_000}
# Currency words and signs -> ISO code. A Korean large unit without one means won (``5만`` in a price).
CURRENCY_WORDS = {
    "원": "KRW", "₩": "KRW", "krw": "KRW", "won": "KRW",
    "달러": "USD", "불": "USD", "$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
    "유로": "EUR", "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "엔": "JPY", "¥": "JPY", "jpy": "JPY", "yen": "JPY",
    "위안": "CNY", "元": "CNY", "cny": "CNY", "yuan": "CNY",
    "파운드": "GBP", "£": "GBP", "gbp": "GBP",
}
_CUR = "|".join(sorted((re.escape(w) for w in CURRENCY_WORDS), key=len, reverse=True))
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# A number: digits and/or Korean units, e.g. "1억 2천만", "12만5천", "50,000", "만", "3.5".
_KOREAN_NUMBER = (rf"(?:(?:{_NUM})?\s*[십백천]?\s*[만억조](?:\s*(?:{_NUM})?\s*[십백천]?\s*[만억조]?)*"
                  rf"(?:\s*(?:{_NUM})\s*[천백십]?)?|(?:{_NUM})\s*[천백]|(?:{_NUM}))")
_AMOUNT = re.compile(
    rf"(?P<pre>[$€¥£₩])?\s*(?P<num>{_KOREAN_NUMBER})\s*(?P<cur>{_CUR})?(?![a-z가-힣])?"
    r"(?P<tail>\s*(?:이하|이내|미만|까지|안쪽|아래|밑|이상|넘는|넘게|초과|부터|정도|쯤|내외|안팎|가량|대|선))?",
    re.IGNORECASE)
MAX_WORDS = ("이하", "이내", "미만", "까지", "안쪽", "아래", "밑")
MIN_WORDS = ("이상", "넘는", "넘게", "초과", "부터")
ABOUT_WORDS = ("정도", "쯤", "내외", "안팎", "가량", "대", "선")
_TO = re.compile(rf"(?P<cur>{_CUR})\s*화?\s*(?:으로|로)(?![가-힣])", re.IGNORECASE)


@dataclass(frozen=True)
class Amount:
    """One amount: its value in its currency (None: not written), the bound a word sets, where it was."""

    value: float
    currency: str | None
    bound: str | None  # "max", "min", "about" or None
    start: int
    end: int
    lead: float  # the first number as written ("5" of "5만 원"): what a model that dropped the unit gives

    @property
    def integer(self) -> int | None:
        """The value as an int when it is whole."""
        return int(self.value) if float(self.value).is_integer() else None


def _digits(text: str) -> float:
    return float(text.replace(",", ""))


def korean_number(text: str) -> tuple[float, float] | None:
    """(value, first number written) of ``1억 2천만``, ``12만5천``, ``50,000``, ``만``, ``3천``; None if none."""
    total = 0.0
    group = 0.0  # the part below 10,000 being built (before a 만/억/조)
    current: float | None = None
    lead: float | None = None
    for m in re.finditer(rf"{_NUM}|[십백천만억조]", text.replace(" ", "")):
        tok = m.group()
        if tok in SMALL:
            group += (current if current is not None else 1) * SMALL[tok]
            lead = SMALL[tok] if lead is None and current is None else lead
            current = None
        elif tok in ("만", "억", "조"):
            part = group + (current or 0)
            part = part or 1
            lead = part if lead is None else lead
            total += part * UNITS[tok]
            group, current = 0.0, None
        else:
            current = _digits(tok)
            lead = current if lead is None else lead
    total += group + (current or 0)
    if lead is None:
        return None
    return total, lead


def amounts(text: str) -> list[Amount]:
    """Every amount of money in ``text``, in order."""
    out: list[Amount] = []
    for m in _AMOUNT.finditer(text):
        num = m["num"].strip()
        if not num:
            continue
        parsed = korean_number(num)
        if parsed is None:
            continue
        value, lead = parsed
        cur_word = (m["pre"] or m["cur"] or "").lower()
        currency = CURRENCY_WORDS.get(cur_word) or CURRENCY_WORDS.get(m["pre"] or "")
        has_unit = bool(re.search(r"[만억조천]", num))
        if currency is None and not has_unit:
            continue  # "3권", "2026년": a number, not an amount
        if currency is None and not re.search(r"\d", num):
            continue  # a unit syllable alone is a word (조언, 만들어, 천천히, 억지로), not an amount
        if currency is None:
            currency = None  # a Korean large unit alone: a price in won, most likely, but not written
        tail = (m["tail"] or "").strip()
        bound = ("max" if tail in MAX_WORDS else "min" if tail in MIN_WORDS else "about" if tail in ABOUT_WORDS
                 else None)
        out.append(Amount(value, currency, bound, m.start("num") if not m["pre"] else m.start("pre"),
                          m.end(), lead))
    return out


def currencies(text: str) -> tuple[list[str], str | None]:
    """The currencies ``text`` names, in order (each once), and the one it converts to (``달러로``), if any.

    A one-syllable currency word (원, 엔, 불) counts only in an amount or as ``원화``/``엔화`` or
    before ``(으)로``: alone it is mostly another word (원하는, 엔진, 불가능).
    """
    found: list[tuple[int, str]] = [(a.start, a.currency) for a in amounts(text) if a.currency]
    for m in re.finditer(_CUR, text, re.IGNORECASE):
        word = m.group().lower()
        code = CURRENCY_WORDS.get(word) or CURRENCY_WORDS.get(m.group())
        if code is None:
            continue
        if len(word) == 1 and word in "원엔불" and not re.match(r"화|\s*(?:으로|로)(?![가-힣])", text[m.end():]):
            continue
        found.append((m.start(), code))
    seen: list[str] = []
    for _, code in sorted(found):
        if code not in seen:
            seen.append(code)
    to = _TO.search(text)
    return seen, CURRENCY_WORDS.get(to["cur"].lower()) if to else None
