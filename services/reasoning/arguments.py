"""Tool arguments checked against what the user wrote: amounts, currencies and dates are read by code.

The model proposes the call; code checks the values a small model gets wrong and a parser gets
right, and puts right what it can prove (the change must still satisfy the tool's schema):

- **amounts**: a money-like number parameter (its name or description says price, budget, amount,
  cost, 가격, 예산, 금액, 원 ...) whose value is not an amount the user wrote, but is that amount's
  leading number (``5`` of ``5만 원``) or a power-of-ten fraction of it (``5000`` of ``5만 원``),
  takes the amount (``50000``) — one candidate only, else it stands;
- **currencies**: a currency parameter (name or description: currency, from, to, source, target,
  통화) takes the currency of the amount the user wrote (``from``/``source``/``base``) or the one
  they convert to (``달러로``: ``to``/``target``/``quote``);
- **dates**: a date parameter (``format: date``/``date-time``, or its name or description says
  date, day, 날짜, 일자) whose value is not the date the user's phrase names against the reference
  date (``12월 15일``, ``다음 주 화요일``, ``내일``) takes that date (the time of a date-time kept);
- **times**: a time parameter (``format: time``, an ``HH:MM`` pattern, or its name says time or
  시각) takes the time the user wrote (``밤 11시`` is 23:00, ``오전 11시 반`` 11:30);
- **the only amount**: when the user wrote exactly one amount and the call has exactly one
  money-like parameter, that parameter is the amount (``2만5천원 정도``: 25000, whatever the
  model wrote).

:func:`grounded` is the other check: whether a call's required arguments come from the
conversation at all (a greeting answered with a weather lookup for a city nobody named is not a
call the user asked for).

Every correction is counted (``mesh_reasoning_argument_corrections_total{kind}``).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, timedelta
from typing import Any

import jsonschema
from prometheus_client import Counter

from services.runtime.korean.amounts import Amount, amounts, currencies
from services.runtime.korean.dates import _time_at, _times, scan
from services.runtime.korean.numbers import numbers as numbers_in

CORRECTIONS = Counter("mesh_reasoning_argument_corrections_total",
                      "Tool-call arguments code put right against the user's words", ["kind"])

# English words count whole (``max_price``, ``maxPrice``; not the fee of "coffee" nor the pay of "display").
MONEY_WORDS = re.compile(r"(?<![a-z])(?:prices?|budgets?|amounts?|costs?|money|fees?|salary|salaries|pay|payment|won"
                         r"|krw|usd|eur|wage|wages)(?![a-z])")
MONEY_KO = re.compile(r"가격|예산|금액|비용|원\b|만\s*원|급여|연봉|월급|요금")


class _Money:
    """Whether a parameter's name or description speaks of money."""

    @staticmethod
    def search(about: str) -> bool:
        words = re.sub(r"([a-z])([A-Z])", r"\1 \2", about).lower()
        return bool(MONEY_WORDS.search(words) or MONEY_KO.search(about))


MONEY = _Money()
CURRENCY = re.compile(r"currency|통화|화폐", re.IGNORECASE)
FROM = re.compile(r"from|source|base|sell|원래|보내", re.IGNORECASE)
TO = re.compile(r"(?<![a-z])to(?![a-z])|target|quote|buy|into|바꿀|받을", re.IGNORECASE)
DATE = re.compile(r"date|day|deadline|when|날짜|일자|일시|기한", re.IGNORECASE)
TIME = re.compile(r"(?<![a-z])time(?![a-z])|시각|시간", re.IGNORECASE)
HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
# The user's words read for the checks: the last this many characters (what a tool call's values come from);
# the readers are linear, and this bounds their time on the event loop at a long message (~2 ms).
USER_TEXT_MAX = 8_000
START = re.compile(r"start|begin|from|since|시작", re.IGNORECASE)
END = re.compile(r"end|until|to(?![a-z])|finish|마감|종료|끝", re.IGNORECASE)


def _about(name: str, schema: dict[str, Any]) -> str:
    return f"{name} {schema.get('title', '')} {schema.get('description', '')}"


def readings(a: Amount) -> set[float]:
    """The values one amount's words allow: its value; for a 대 range also its top (and the next round number)."""
    out = {float(a.value)}
    if a.high is not None:
        out |= {float(a.high), float(a.high) + 1}
    return out


def _amount_fix(value: float, found: list[Amount]) -> float | None:
    """The amount ``value`` was meant to be (a unit or a power of ten lost), when exactly one fits.

    A value one reading of the words gives is kept (the model's reading stands); only a value no reading
    gives and one amount explains (its first number, or a power-of-ten fraction of it) is replaced.
    """
    if any(value in readings(a) for a in found) or value <= 0:
        return None
    fits = {a.value for a in found if a.lead == value
            or (a.value > value and (a.value / value) in (10.0, 100.0, 1000.0, 10000.0))}
    return fits.pop() if len(fits) == 1 else None


def _currency_fix(name: str, schema: dict[str, Any], value: str, text: str) -> str | None:
    named, to = currencies(text)
    written = [a.currency for a in amounts(text) if a.currency]
    want: str | None = None
    if TO.search(name) and to:
        want = to
    elif FROM.search(name) and written:
        want = next((c for c in written if c != to), written[0])
    elif not TO.search(name) and not FROM.search(name) and len(named) == 1:
        want = named[0]
    if want is None or want == value.upper():
        return None
    allowed = schema.get("enum")
    if allowed is not None and want not in allowed:
        lowered = [v for v in allowed if isinstance(v, str) and v.upper() == want]
        return lowered[0] if lowered else None
    return want if value.isupper() or not value else want.lower() if value.islower() else want


def _date_fix(name: str, value: str, text: str, today: date) -> str | None:
    m = ISO_DATE.match(value)
    spans = scan(text, today)
    if not m or not spans:
        return None
    s = spans[0]
    target = s.start.day
    if END.search(name) and not START.search(name):
        target = (s.end or (spans[1].start if len(spans) > 1 else s.start)).day
    try:
        given = date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return target.isoformat() + value[10:]
    readings = {d.day for sp in spans for d in (sp.start, sp.end) if d is not None}
    readings |= {d.day - timedelta(days=1) for sp in spans for d in (sp.start, sp.end) if d is not None and d.night}
    if given == target or given in readings:  # "오늘 밤 1시": today's date is a reading of the words too
        return None  # a date one phrase of the user's names: the model's reading stands
    return target.isoformat() + value[10:]


def _time_fix(value: str, text: str) -> str | None:
    if not HHMM.match(value):
        return None
    found = times_written(text)
    if not found:
        return None
    if any(value in t for t in found):
        return None  # one reading of the words gives it ("3시" is 15:00 or 03:00): the model's reading stands
    return found[0][0]


def times_written(text: str) -> list[list[str]]:
    """Each time of day the user wrote as its readings ("HH:MM"): code's first, then 12 hours apart if unfixed.

    An hour without 오전/오후/밤 (``3시``) is read 15:00 by the business-hours rule, and 03:00 is a valid reading too.
    """
    out = []
    for words, at in _times(text):
        read = [at.strftime("%H:%M")]
        if not words.mer and not words.word and not words.clock and 1 <= words.hour <= 12:
            other = (at.hour + 12) % 24
            read.append(f"{other:02d}:{at.minute:02d}")
        out.append(read)
    return out


def _is_time(name: str, schema: dict[str, Any]) -> bool:
    pattern = str(schema.get("pattern", ""))
    return schema.get("format") == "time" or "[0-9]{2}:[0-9]{2}" in pattern or bool(TIME.search(name))


def correct(arguments: dict[str, Any], parameters: dict[str, Any], user_text: str,
            today: date) -> dict[str, Any]:
    """``arguments`` with what code can prove put right (the tool's ``parameters`` still hold); else as given."""
    props = parameters.get("properties") or {}
    if not user_text or not isinstance(arguments, dict) or not isinstance(props, dict):
        return arguments
    user_text = user_text[-USER_TEXT_MAX:]
    found = amounts(user_text)
    out = dict(arguments)
    changed: list[str] = []
    money_params = [n for n, v in arguments.items() if isinstance(props.get(n), dict)
                    and props[n].get("type") in ("integer", "number") and isinstance(v, int | float)
                    and not isinstance(v, bool) and MONEY.search(_about(n, props[n]))]
    for name, value in arguments.items():
        schema = props.get(name)
        if not isinstance(schema, dict):
            continue
        kind = schema.get("type")
        about = _about(name, schema)
        fixed: Any = None
        what = ""
        if kind in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
            if found and MONEY.search(about):
                fixed, what = _amount_fix(float(value), found), "amount"
                if fixed is None and len(found) == 1 and money_params == [name] \
                        and float(value) not in readings(found[0]):
                    fixed = found[0].value  # the only amount written, the only money parameter
                if fixed is not None and kind == "integer":
                    fixed = int(fixed) if float(fixed).is_integer() else None
        elif kind == "string" and isinstance(value, str):
            if CURRENCY.search(about) or ("enum" in schema and all(
                    isinstance(v, str) and re.fullmatch(r"[A-Za-z]{3}", v) for v in schema["enum"])):
                fixed, what = _currency_fix(name, schema, value, user_text), "currency"
            elif _is_time(name, schema):
                fixed, what = _time_fix(value, user_text), "time"
            elif schema.get("format") in ("date", "date-time") or DATE.search(about):
                fixed, what = _date_fix(name, value, user_text, today), "date"
            elif FOREIGN.search(value):
                fixed, what = _script_fix(value, user_text), "script"
        if fixed is not None and fixed != value:
            out[name] = fixed
            changed.append(what)
    if not changed:
        return arguments
    try:
        jsonschema.validate(out, parameters, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError:
        return arguments  # a correction the tool's schema refuses is not made
    for what in changed:
        CORRECTIONS.labels(what).inc()
    return out


# Han characters and kana: a small model slips them into Korean words (면接 for 면접).
FOREIGN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _script_fix(value: str, text: str) -> str | None:
    """``value`` with each word in a script the user did not write put back in the user's spelling.

    The user's spelling: the one stretch of the user's text of the same length that agrees on every other
    character (면接 → 면접). None when a word has no such stretch or several (then :func:`foreign_characters`
    refuses it).
    """
    out = value
    for word in set(re.findall(r"\S+", value)):
        bad = [i for i, ch in enumerate(word) if FOREIGN.match(ch) and ch not in text]
        if not bad:
            continue
        n = len(word)
        found = {text[i:i + n] for i in range(len(text) - n + 1)
                 if not any(c.isspace() for c in text[i:i + n])
                 and all(text[i + j] == ch for j, ch in enumerate(word) if j not in bad)}
        if len(found) != 1:
            return None
        out = out.replace(word, found.pop())
    return out if out != value else None


def foreign_characters(arguments: Any, user_text: str) -> str:
    """The characters of a script the user did not write (Han, kana) left in string arguments ('' when none)."""
    if isinstance(arguments, str):
        return "".join(dict.fromkeys(ch for ch in FOREIGN.findall(arguments) if ch not in user_text))
    if isinstance(arguments, dict):
        return "".join(foreign_characters(v, user_text) for v in arguments.values())
    if isinstance(arguments, list):
        return "".join(foreign_characters(v, user_text) for v in arguments)
    return ""


def _squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def _grounded_value(name: str, schema: dict[str, Any], value: Any, text: str, squashed: str, today: date) -> bool:
    """Whether one argument's value comes from the user's words (a date phrase, an amount, a word written)."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        written = {r for a in amounts(text) for r in readings(a)} | {n.value for n in numbers_in(text)} \
            | {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}
        return float(value) in written
    if not isinstance(value, str):
        return True
    if schema.get("format") in ("date", "date-time") or DATE.search(_about(name, schema)) and ISO_DATE.match(value):
        return bool(scan(text, today))
    if _is_time(name, schema) and HHMM.match(value):
        return _time_at(text) is not None
    if CURRENCY.search(_about(name, schema)) or re.fullmatch(r"[A-Z]{3}", value):
        return value.upper() in currencies(text)[0] or (currencies(text)[1] or "") == value.upper()
    words = [w for w in re.findall(r"[0-9A-Za-z가-힣]+", value) if len(w) >= 2 or w.isdigit()]
    return not words or any(_squash(w[:2] if len(w) > 2 and re.match(r"[가-힣]", w) else w) in squashed
                            for w in words)


def _readable(name: str, schema: dict[str, Any], value: Any) -> bool:
    """Whether an argument is of a kind code reads from text: a date, a time, an amount of money, a currency."""
    about = _about(name, schema)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return bool(MONEY.search(about))
    if not isinstance(value, str):
        return False
    return (schema.get("format") in ("date", "date-time") or bool(DATE.search(about) and ISO_DATE.match(value))
            or (_is_time(name, schema) and bool(HHMM.match(value)))
            or bool(CURRENCY.search(about)))


def grounded(arguments: dict[str, Any], parameters: dict[str, Any], user_text: str, today: date) -> bool:
    """Whether a call's required arguments come from the user's words.

    Not when none of them does (a weather lookup for a city nobody named, a gift for a recipient
    and a budget nobody mentioned), nor when a required value of a kind code reads — a date, a
    time, an amount, a currency — is nowhere in what the user wrote (a calendar entry for a résumé
    question, dated today by the model): that value was invented, and the user is better asked or
    answered than served a call they did not make. A call without required arguments is grounded.
    """
    props = parameters.get("properties") or {}
    required = [n for n in parameters.get("required") or [] if n in arguments]
    if not required or not user_text:
        return True
    user_text = user_text[-USER_TEXT_MAX:]
    squashed = _squash(user_text)
    found = {n: _grounded_value(n, props.get(n) or {}, arguments[n], user_text, squashed, today) for n in required}
    if not any(found.values()):
        return False
    return all(found[n] for n in required if _readable(n, props.get(n) or {}, arguments[n]))
