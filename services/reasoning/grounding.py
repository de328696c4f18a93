"""Every argument of a tool call grounded in the person's words, whatever the tool (any team's tools).

The model proposes a call; code checks each value against what the person wrote and the tool's own
schema, and decides one of three outcomes (:func:`ground`):

- **call**, with each value the person's or one code derives:
  - a string is a stretch of the person's words, or made of their words (compared without spaces, case
    folded); a near copy — the same length within an edit or two of one stretch, or one changed
    digit of a phone number — is put back in the person's spelling, with the stretch as the proof
    ("중심섭거리" → "이중섭거리", "010-1123-3444" → "010-1122-3344"); a long free text (a message,
    a memo) needs most of its character pairs in the words. Derived, and left to the other checks: an
    ``format`` (date, time, e-mail …) or a pattern, a currency or language code, and a parameter whose
    description asks for a conversion; an ``enum`` value is one the person named;
  - a number equals one the person wrote, read by the Korean number reader (십오프로 is 15, 오만 원 50000,
    세 명 3), or an amount's reading (services/reasoning/arguments.py);
  - a boolean set true needs a word of its parameter's name or description in the words ("대문자" for
    ``use_uppercase``; "전부 숫자로" names none): else its default;
  - an optional value the person did not say is left out (the tool's default stands);
- **ask**: a required value is not grounded (a pizza without a size, a taxi without a destination): no
  call; the reply asks for exactly those values, named from the schema's descriptions, in one question
  (:func:`ask_for`);
- **decline**: no required value is grounded and the tool's name, description and parameters share no
  word with the request (a 100-second timer asked of ``count_uppercase_letters``): no call, and the model
  replies without tools.

Every check is linear in the words and the arguments (the words are cut at ``USER_TEXT_MAX``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from services.runtime.korean.amounts import amounts
from services.runtime.korean.numbers import NATIVE_UNITS, native_at
from services.runtime.korean.numbers import numbers as numbers_in
from services.runtime.korean.particles import WORD_ENDINGS, strip_particle

USER_TEXT_MAX = 8_000
FREE_TEXT_CHARS = 8  # a string this long or longer is free text: most of its character pairs must be the person's
MIN_PAIRS = 0.6  # share of a free text's character pairs the words must hold (the assistant's own-words share)
# A description asking for a conversion or a format: the value is derived, not copied.
DERIVED = re.compile(r"ISO|YYYY|HH:MM|형식|변환|코드|code|format|영문|영어로|소문자|대문자로|바꿔 써|rewrite|paraphras",
                     re.IGNORECASE)
# A description asking for the person's expression as said ("사용자의 표현 그대로", "as the user said").
AS_SAID = re.compile(r"그대로|표현|as (?:the user |they )?(?:said|written|wrote)|verbatim", re.IGNORECASE)
WORD = re.compile(r"[0-9A-Za-z가-힣]+")
# Currencies and languages as codes (KRW, en): read by services/reasoning/arguments.py, not copied.
CODES = re.compile(r"currency|통화|화폐|language|언어", re.IGNORECASE)


def squash(text: str) -> str:
    """``text`` compared as values are: NFKC, case folded, spaces and punctuation between words removed."""
    return "".join(WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


@dataclass
class Grounding:
    """What code decided for one call: the arguments to send, or the values to ask for, or a decline."""

    arguments: dict[str, Any]
    missing: list[str] = field(default_factory=list)  # required parameters with no grounded value
    snapped: dict[str, str] = field(default_factory=dict)  # parameter -> the person's stretch it was put back to
    dropped: list[str] = field(default_factory=list)  # optional parameters the person did not say
    related: bool = True  # the request shares a word with the tool

    @property
    def outcome(self) -> str:
        """``call``, ``ask`` or ``decline``."""
        if not self.missing:
            return "call"
        return "ask" if self.related else "decline"


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it is over ``limit`` (banded, linear)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [limit + 1] * len(b)
        lo, hi = max(1, i - limit), min(len(b), i + limit)
        for j in range(lo, hi + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != b[j - 1]))
        prev = cur
    return min(prev[len(b)], limit + 1)


def _near(value: str, text: str) -> str | None:
    """The one stretch of ``text`` (its spelling, spaces kept) a near copy ``value`` was meant to be, else None.

    Near: two fifths of its length in edits (one at least, three at most); stretches of about the same
    length, starting and ending at word edges or particles. Two stretches as near: no proof, None.
    """
    want = squash(value)
    if len(want) < 2:
        return None
    limit = min(3, max(1, len(want) * 2 // 5))
    words = [(m.start(), m.end()) for m in WORD.finditer(text)]
    found: dict[str, int] = {}
    for i in range(len(words)):
        for j in range(i, min(len(words), i + 6)):
            start, end = words[i][0], words[j][1]
            stretch = text[start:end]
            for cut in {stretch, strip_particle(stretch, WORD_ENDINGS)}:
                d = _edits(want, squash(cut), limit)
                if d <= limit:
                    found[cut] = min(d, found.get(cut, d))
            if len(squash(stretch)) > len(want) + limit:
                break
    if not found:
        return None
    best = min(found.values())
    spans = {k for k, d in found.items() if d == best}
    return spans.pop() if len(spans) == 1 else None


def _digits_fix(value: str, text: str) -> str | None:
    """A phone or account number with digits changed: the one number the person wrote with as many digits."""
    digits = re.sub(r"\D", "", value)
    if len(digits) < 7:
        return None
    written = [m.group() for m in re.finditer(r"\d[\d\- ]{5,}\d", text)]
    same = [w for w in written if len(re.sub(r"\D", "", w)) == len(digits)]
    if len(same) != 1:
        return None
    return same[0].strip()


def _pairs_share(value: str, text: str) -> float:
    v = squash(value)
    pairs = [v[i:i + 2] for i in range(len(v) - 1)]
    return sum(p in text for p in pairs) / len(pairs) if pairs else 1.0


def _numbers(text: str) -> set[float]:
    out = {n.value for n in numbers_in(text)}
    out |= {float(a.value) for a in amounts(text)}
    out |= {float(m.group().replace(",", "")) for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text)}
    for m in re.finditer(r"[가-힣]+", text):  # native numerals before a counter: 세 명, 두 판, 열두 개
        at = native_at(text, m.start())
        if at is not None and (at[1] < len(text) and text[at[1]] in " 명개판잔병장권대시번살마" or at[1] == m.end()
                               and m.group() not in NATIVE_UNITS):
            out.add(float(at[0]))
    return out


def _about(name: str, schema: dict[str, Any]) -> str:
    return f"{name} {schema.get('title', '')} {schema.get('description', '')}"


def _terms(text: str) -> set[str]:
    """Content words (two letters or more, a particle cut): Korean words, English words split at case and _."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ")
    out = set()
    for w in WORD.findall(unicodedata.normalize("NFKC", spaced).casefold()):
        w = strip_particle(w, WORD_ENDINGS)
        if len(w) >= 2 and not w.isdigit():
            out.add(w)
    return out


def _shares_word(a: set[str], b: set[str]) -> bool:
    """Whether a word of ``a`` and one of ``b`` open alike (the first two letters of the shorter, 3/5 of it)."""
    for x in a:
        for y in b:
            short, long_ = (x, y) if len(x) <= len(y) else (y, x)
            head = short[: max(2, -(-len(short) * 3 // 5))]
            if long_.startswith(head) or head in long_ and len(head) >= 2 and re.match(r"[가-힣]", head):
                return True
    return False


def ground(name: str, description: str, arguments: dict[str, Any], parameters: dict[str, Any],
           user_text: str) -> Grounding:
    """Code's decision on the model's call ``name(arguments)`` for ``user_text`` (see the module)."""
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    text = user_text[-USER_TEXT_MAX:]
    flat = squash(text)
    written = _numbers(text)
    request = _terms(text)
    out: dict[str, Any] = {}
    g = Grounding(out)
    for key, value in arguments.items():
        schema: dict[str, Any] = props[key] if isinstance(props.get(key), dict) else {}
        about = _about(key, schema)
        ok: bool
        if isinstance(value, bool):  # (before numbers: a bool is an int)
            ok = not value or value == schema.get("default") or _shares_word(_terms(about) - {"use", "is", "여부"},
                                                                              request)
            if not ok and key not in required:
                g.dropped.append(key)
                continue
        elif isinstance(value, int | float):
            ok = float(value) in written
            if not ok:  # the one number the person wrote that no other argument holds (십오프로 read as 10)
                free = written - {float(v) for k, v in arguments.items() if k != key and isinstance(v, int | float)}
                if len(free) == 1 and (fixed_n := free.pop()) >= 0:
                    fixed_v = int(fixed_n) if schema.get("type") == "integer" and fixed_n.is_integer() else fixed_n
                    g.snapped[key] = str(fixed_v)
                    value, ok = fixed_v, True
        elif isinstance(value, str):
            derived = "format" in schema or "pattern" in schema or CODES.search(about) or (
                bool(DERIVED.search(str(schema.get("description", "")))) and not AS_SAID.search(about)) or (
                "enum" in schema and all(isinstance(e, str) and re.fullmatch(r"[A-Z]{3}", e) for e in schema["enum"]))
            v = squash(value)
            if derived or not v:
                ok = True
            elif "enum" in schema:  # one of the tool's values: the person named it (a size nobody said is asked)
                ok = v in flat
            elif v in flat or all(squash(w) in flat for w in value.split()):
                ok = True  # the person's words, whole or word by word ("金민서 면담" of "金민서 님과 면담")
            else:
                fixed = _digits_fix(value, text) if re.search(r"\d{3}", value) else _near(value, text)
                if fixed is not None:
                    g.snapped[key] = fixed
                    value, ok = fixed, True
                else:  # a free text (a message, a memo) in the person's words more than not
                    ok = len(v) >= FREE_TEXT_CHARS and not AS_SAID.search(about) \
                        and _pairs_share(value, flat) >= MIN_PAIRS
        else:
            ok = True  # lists and objects: their own schema; not read here
        if ok:
            out[key] = value
        elif key in required:
            g.missing.append(key)
        else:
            g.dropped.append(key)
    g.missing += [k for k in parameters.get("required") or [] if k not in arguments and k not in g.missing]
    if g.missing:
        tool_words = _terms(f"{name} {description}") | {t for k, s in props.items() if isinstance(s, dict)
                                                         for t in _terms(_about(k, s))}
        grounded_required = [k for k in required if k in out]
        g.related = bool(grounded_required) or _shares_word(tool_words, request)
    return g


def _object_particle(word: str) -> str:
    last = word[-1:] if word else ""
    if "가" <= last <= "힣":
        return "을" if (ord(last) - 0xAC00) % 28 else "를"
    return "을(를)"


def ask_for(missing: list[str], parameters: dict[str, Any]) -> str:
    """One question asking for exactly the ``missing`` values, named by their descriptions (or names)."""
    props = parameters.get("properties") or {}
    names = []
    for key in missing:
        schema: dict[str, Any] = props[key] if isinstance(props.get(key), dict) else {}
        label = str(schema.get("description") or schema.get("title") or key).strip().rstrip(".")
        label = re.split(r"[(:,;]| \(|\. ", label)[0].strip() or key
        if "enum" in schema and len(schema["enum"]) <= 6:
            label += f"({', '.join(str(v) for v in schema['enum'])} 중)"
        names.append(label)
    joined = ", ".join(names)
    return f"{joined}{_object_particle(names[-1].split('(')[0])} 알려 주세요."
