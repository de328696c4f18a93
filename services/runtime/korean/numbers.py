"""Numbers as Korean writes them, read by grammar: digits, Sino-Korean numerals, native numerals and any mix.

``12,000``, ``1.5만``, ``3천5백만``, ``오만``, ``만오천``, ``삼천오백만``, ``구만 구천``, ``1억 2천만`` are one number
each (:func:`numbers`); ``열두``, ``세``, ``다섯`` (:func:`native_at`) are native numerals for hours and counts.

Stated rules (not fitted to data):

- digits and Sino-Korean numerals (일 이 삼 … 구) multiply the small unit after them (십 백 천), a group
  below 10,000 multiplies the large unit after it (만 억 조); a unit written alone is one of it (``만 원``);
- a space may sit only after a large unit (``1억 2천만``, ``만 오천``);
- after 억 or 조 a last group written with 천/백/십 leaves out the next large unit (``3억5천`` is 3억 5천만,
  as people write prices of flats); a last lone digit after a large unit is its tenth (``3만5`` is 35,000);
- a Sino-Korean numeral is a number only where it starts a word and has a unit (``삼천``; not the 이 of
  ``가격이``, nor ``사과``); its ones digit after 십/백/천 only where a counter follows (``십오프로`` is 15,
  ``천이 넘어요`` 1,000); digits glued to a Latin letter are a name (``V8``, ``i7``, ``A4``), not a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.runtime.korean.particles import starts_word

SMALL = {"십": 10, "백": 100, "천": 1_000}
LARGE = {"만": 10_000, "억": 100_000_000, "조": 1_000_000_000_000}
SINO = {"일": 1, "이": 2, "삼": 3, "사": 4, "오": 5, "육": 6, "칠": 7, "팔": 8, "구": 9}
DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# The ones digit after 십, 백 or 천 (십오, 삼십오, 백이) where a counter or unit follows it (십오프로, 삼십오 명,
# 십이월): not 천사, nor the particle of 천이 넘어요.
_LAST = r"(?<=[십백천])[일이삼사오육칠팔구](?=[월일시분초년원명개번회층세살장권주%]|프로|퍼센트|\s[원명개번회])"
# (Tokens are read within a run _RUN found, where the counter after the last digit is already checked.)
_TOKEN = re.compile(rf"{DIGITS}|[일이삼사오육칠팔구](?=[십백천만억조])|(?<=[십백천])[일이삼사오육칠팔구]$"
                    r"|[십백천만억조]")
_RUN = re.compile(rf"(?:{DIGITS}|[일이삼사오육칠팔구](?=[십백천만억조])|{_LAST}|[십백천만억조])+")

NATIVE_UNITS = {"한": 1, "하나": 1, "두": 2, "둘": 2, "세": 3, "셋": 3, "석": 3, "네": 4, "넷": 4, "다섯": 5, "여섯": 6,
                "일곱": 7, "여덟": 8, "아홉": 9}
NATIVE_TENS = {"열": 10, "스물": 20, "스무": 20, "서른": 30, "마흔": 40, "쉰": 50, "예순": 60, "일흔": 70, "여든": 80,
               "아흔": 90}
_NATIVE = re.compile(
    "(?P<tens>" + "|".join(sorted(NATIVE_TENS, key=len, reverse=True)) + r")?\s?"
    "(?P<unit>" + "|".join(sorted(NATIVE_UNITS, key=len, reverse=True)) + ")?")


@dataclass(frozen=True)
class Number:
    """One number as written: its value, where it is, the first number written, and how it was written."""

    value: float
    start: int
    end: int
    lead: float  # the first number written: 5 of 5만, what a model that drops the unit gives
    hangul: bool  # written in Sino-Korean numerals and units only (오만, 천): a word unless a currency follows
    large: bool  # holds 만, 억 or 조
    unit: bool  # holds any unit (천 included)


def _digits(text: str) -> float:
    return float(text.replace(",", ""))


def value_of(tokens: list[str]) -> tuple[float, float] | None:
    """(value, first number) of a run's tokens: ``['3', '천', '5', '백', '만']`` is (35,000,000, 3)."""
    total = 0.0
    group = 0.0  # the part below the next large unit, being built
    current: float | None = None
    lead: float | None = None
    last_large = 0
    group_has_small = False
    for tok in tokens:
        if tok in SMALL:
            group += (current if current is not None else 1) * SMALL[tok]
            lead = SMALL[tok] if lead is None and current is None else lead
            current = None
            group_has_small = True
        elif tok in LARGE:
            part = (group + (current or 0)) or 1
            lead = part if lead is None else lead
            total += part * LARGE[tok]
            group, current, last_large, group_has_small = 0.0, None, LARGE[tok], False
        else:
            value = SINO[tok] if tok in SINO else _digits(tok)
            if current is not None:  # two numbers side by side ("3 5"): not one number
                return None
            current = value
            lead = value if lead is None else lead
    if lead is None:
        return None
    tail = group + (current or 0)
    if tail and last_large >= LARGE["억"] and group_has_small and tail < 10_000:
        tail *= last_large // 10_000  # 3억5천: 3억 5천만
    elif tail and last_large and not group_has_small and current is not None and current < 10 and group == 0 \
            and float(current).is_integer():
        tail *= last_large / 10  # 3만5: 35,000
    elif tail and last_large >= LARGE["억"] and not group_has_small and tail < 10_000:
        tail *= 10_000  # 1억 2000: 1억 2000만
    return total + tail, lead


_PLAIN = re.compile(DIGITS)
_UNIT_IN = re.compile(r"[십백천만억조]")


def _parse(text: str, start: int, end: int) -> Number | None:
    run = text[start:end]
    if _PLAIN.fullmatch(run):  # digits alone, the common case
        value = _digits(run)
        return Number(value, start, end, value, False, False, False)
    tokens = _TOKEN.findall(run.replace(" ", ""))
    parsed = value_of(tokens)
    if parsed is None:
        return None
    value, lead = parsed
    large = any(t in LARGE for t in tokens)
    unit = large or any(t in SMALL for t in tokens)
    hangul = not re.search(r"\d", run)
    return Number(value, start, end, lead, hangul, large, unit)


def numbers(text: str, unit_after: re.Pattern[str] | None = None, *, signs: str | None = None) -> list[Number]:
    """Every number in ``text``, in order (one pass).

    A bare number after a large unit and a space joins it only where ``unit_after`` (a currency) follows it:
    ``257만 100원`` is one amount, ``5만 3개`` two numbers. With ``signs`` (a reader of money), digits alone
    are kept only where ``unit_after`` follows them or one of ``signs`` stands before them.
    """
    out: list[Number] = []
    runs = [(m.start(), m.end()) for m in _RUN.finditer(text)]
    i = 0
    while i < len(runs):
        start, end = runs[i]
        first = text[start]
        if not first.isdigit() and not starts_word(text, start):
            i += 1
            continue
        if first.isdigit() and start > 0 and (text[start - 1].isascii() and text[start - 1].isalpha()
                                              or text[start - 1] in "._"):
            i += 1
            continue
        # A space after a large unit joins the next run ("1억 2천만", "구만 구천", "만 오천").
        while i + 1 < len(runs) and text[end - 1] in LARGE and runs[i + 1][0] == end + 1 and text[end] == " " \
                and (re.search(r"[십백천만억조]|\d{4}", text[runs[i + 1][0]:runs[i + 1][1]].replace(",", ""))
                     or unit_after is not None and unit_after.match(text, runs[i + 1][1])):
            merged = _parse(text, start, runs[i + 1][1])
            alone = _parse(text, start, end)
            if merged is None or alone is None or merged.value <= alone.value:
                break
            i += 1
            end = runs[i][1]
        if end < len(text) and text[end].isascii() and text[end].isalpha() and first.isdigit() \
                and text[end - 1].isdigit() and not text[end:end + 3].lower().startswith(("krw", "won", "usd", "eur",
                                                                                          "jpy", "cny", "gbp")):
            number = _parse(text, start, end)
            if number is not None:  # 500ml, 3GB: a quantity, kept for the counter check
                out.append(number)
            i += 1
            continue
        if signs is not None and unit_after is not None and first.isdigit() and text[end - 1].isdigit() \
                and not _UNIT_IN.search(text, start, end) and not unit_after.match(text, end) \
                and not (start and text[start - 1] in signs or start > 1 and text[start - 2] in signs):
            i += 1  # digits alone, no currency: no amount
            continue
        number = _parse(text, start, end)
        if number is not None:
            out.append(number)
        i += 1
    return out


def native_at(text: str, at: int) -> tuple[int, int] | None:
    """(value, end) of a native numeral starting a word at ``at`` (``열두``, ``세``, ``스물다섯``), else None."""
    if not starts_word(text, at):
        return None
    m = _NATIVE.match(text, at)
    if not m or not (m["tens"] or m["unit"]):
        return None
    value = (NATIVE_TENS[m["tens"]] if m["tens"] else 0) + (NATIVE_UNITS[m["unit"]] if m["unit"] else 0)
    end = m.end("unit") if m["unit"] else m.end("tens")
    return value, end
