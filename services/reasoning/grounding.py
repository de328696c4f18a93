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
- **decline**: a required value is missing and the tool's name, description and parameters share no
  content lemma with the request's words that the values do not hold (:func:`related`: "짜장면 만드는 법"
  as ``order_pizza(menu="짜장면")``): no call, and the model replies without tools. A call whose values
  are all the person's is not declined on words: declining those too ("세탁기 돌려 줘" as
  ``set_light(room="세탁기")``) refused 12 of the mesh's own 44 tool cases (bench/results/llm_api_tools.md:
  "오늘 서울에 비 와?" shares no lemma with "도시의 날씨 예보를 조회한다", "100달러는 원화로 얼마야?"
  none with "금액을 다른 통화로 환산한다"); paraphrase needs meaning, not words. A tool described in
  another script than the request is not judged on words.
  Set on the tune split of bench/data/tools_any_team.json, where it tells every case apart; e5
  similarities of request and tool were measured there too and overlap (the right tool 0.861–0.935, the
  best candidate of a request no tool serves 0.814–0.864), so they are not used.

Every check is linear in the words and the arguments (the words are cut at ``USER_TEXT_MAX``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from services.runtime.korean import morphs
from services.runtime.korean.amounts import amounts
from services.runtime.korean.numbers import NATIVE_UNITS, native_at
from services.runtime.korean.numbers import numbers as numbers_in
from services.runtime.korean.particles import WORD_ENDINGS, strip_particle
from services.runtime.korean.questions import acts

USER_TEXT_MAX = 8_000
FREE_TEXT_CHARS = 8  # a string this long or longer is free text: most of its character pairs must be the person's
MIN_PAIRS = 0.6  # share of a free text's character pairs the words must hold (the assistant's own-words share)
# A description asking for a conversion or a format: the value is derived, not copied.
DERIVED = re.compile(r"ISO|YYYY|HH:MM|형식|변환|코드|code|format|영문|영어로|소문자|대문자로|바꿔 써|rewrite|paraphras",
                     re.IGNORECASE)
# A description asking for the person's expression as said ("사용자의 표현 그대로", "as the user said").
AS_SAID = re.compile(r"그대로|표현|as (?:the user |they )?(?:said|written|wrote)|verbatim", re.IGNORECASE)
WORD = re.compile(r"[0-9A-Za-z가-힣]+")
HANGUL = re.compile(r"[가-힣]")
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
        """``call``; ``ask`` (a required value missing); ``decline`` (one missing, and the tool unrelated)."""
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


DIGIT_GROUPS = re.compile(r"\d{7,}|\d+(?:[- ]\d+){2,}")  # a phone, account or tracking number


def _digits_fix(value: str, text: str) -> str | None:
    """The one long number the person wrote that ``value`` copies, in the person's grouping, else None.

    A copy: as many digits (010-1123-3444 for 010-1122-3344), or one digit dropped or added (010-778-9900
    for 010-7788-9900);
    its grouping is the person's (123-456-78901 for 123-45-678901). Two numbers as near: no proof, None.
    """
    digits = re.sub(r"\D", "", value)
    if len(digits) < 7:
        return None
    written = {m.group().strip() for m in re.finditer(r"\d[\d\- ]{5,}\d", text)}
    near = [w for w in written if len(d := re.sub(r"\D", "", w)) == len(digits) or _edits(digits, d, 1) <= 1]
    exact = [w for w in near if re.sub(r"\D", "", w) == digits]
    found = exact or near
    return found[0] if len(found) == 1 else None


QUOTATIVE = ("이라고", "라고")  # the particle that closes a quoted message ("곧 도착해 라고")


def _trimmed(value: str, text: str) -> str | None:
    """A value made of a stretch of the words plus words the person never wrote: the stretch, else None.

    "곧 도착해 라고 알려줘" for "…로 곧 도착해 라고 문자 보내줘" is "곧 도착해": the longest run of the
    value's words that the text holds (a quotative 라고 cut off), when the words left over are fewer and
    none of them is the person's.
    """
    words = value.split()
    flat = squash(text)
    best: tuple[int, int] = (0, 0)
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + 12) + 1):
            if squash(" ".join(words[i:j])) not in flat:
                break
            if j - i > best[1] - best[0]:
                best = (i, j)
    kept = best[1] - best[0]
    rest = words[:best[0]] + words[best[1]:]
    if kept == 0 or not rest or len(rest) > kept or any(squash(w) in flat for w in rest):
        return None
    run = " ".join(words[best[0]:best[1]])
    run = next((run[:-len(q)] for q in QUOTATIVE if run.endswith(q)), run).strip()
    return run if len(squash(run)) >= 2 else None


def _pairs_share(value: str, text: str) -> float:
    v = squash(value)
    pairs = [v[i:i + 2] for i in range(len(v) - 1)]
    return sum(p in text for p in pairs) / len(pairs) if pairs else 1.0


# A duration converted by code (3분 as 180 seconds, 2시간 as 120 minutes or 7,200 seconds): derived values.
DURATION = {"시간": (60.0, 3600.0), "분": (60.0,), "주": (7.0,), "일": (24.0,)}


# A number of a date or a clock time (12월, 24일, 7시, 30분) counts only for a parameter of time: "12월 12일
# 저녁 7시 4명" gives people 4, never 12 or 7 (found on the report split: people=12).
_DATED = re.compile(r"(?<![\d.])\d++\s?(?:년|월|일|시(?!간)|분|초)")
_OF_TIME = re.compile(r"(?<![가-힣])(?:년|월|일|시|분|초)(?![가-힣])|날짜|일자|일수|시각|시간|시점|기간|요일|개월"
                      r"|date|time|day|month|year|hour|minute|second|duration|period|when", re.IGNORECASE)


def _numbers(text: str) -> set[float]:
    out = {n.value for n in numbers_in(text)}
    for n in numbers_in(text):
        after = text[n.end:n.end + 3].lstrip()
        unit = next((u for u in DURATION if after.startswith(u)), None)
        if unit is not None:
            out |= {n.value * f for f in DURATION[unit]}
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


LEMMA_TAGS = ("NNG", "NNP", "NR", "SL", "XR", "VV", "VA")  # nouns, foreign words, roots, verb and adjective stems
# Verbs of grammar, not of a task: the light verbs (하다, 되다, 있다, 없다), the pro-adjectives (어떻다 …)
# and the verbs of asking (알리다: "알려 줘", 주다, 보다 as in "봐 줘", 싶다): "채용 절차가 어떻게 돼?" asks
# nothing of a tool beyond its nouns. Kiwi tags most of them VX when auxiliary; as main verbs they are here.
LIGHT = frozenset("하 되 있 없 어떻 이렇 그렇 저렇 알리 주 보 싶 않 같".split())
# Kiwi tags a content verb VX at times ("만드는 법": 만들/VX): kept unless it is one of the auxiliaries
# of Korean grammar (-어 주다, -어 보다, -고 싶다, -지 않다, -어 있다, -어 버리다, -어 놓다, -어 두다,
# -어 가다/오다, -어지다, -어 내다, -게 하다/되다, -지 말다).
AUXILIARY = frozenset("주 보 싶 않 있 버리 놓 두 가 오 지 내 하 되 말 대".split())


def _tokens(text: str) -> list[Any]:
    return morphs.tokens(text[:USER_TEXT_MAX])


def lemmas(text: str, nouns: bool = False) -> set[str]:
    """The content lemmas of ``text`` by Kiwi (꺼 and 끈다 are both 끄; 세탁기를 is 세탁기), case folded.

    One-letter lemmas are kept (불, 방, 끄): :func:`related` compares them whole. ``nouns``: the nouns and
    foreign words only (values a request may carry: 서면역, KTX), not numerals. Linear in the text.
    """
    if nouns:
        return {t.form.casefold() for t in _tokens(text) if t.tag in ("NNG", "NNP", "SL")}
    return {t.form.casefold() for t in _tokens(text) if t.tag.startswith(LEMMA_TAGS) and t.form not in LIGHT
            or t.tag == "VX" and t.form not in AUXILIARY}


def _shared(tool: str, request: str) -> int:
    """How many of the request's lemmas the tool's text shares (:func:`related`'s matching)."""
    a = lemmas(re.sub(r"([a-z])([A-Z])", r"\1 \2", tool).replace("_", " "))
    return sum(1 for w in lemmas(request) if w in a or len(w) >= 2 and _shares_word({x for x in a if len(x) >= 2}, {w}))


def related(tool_text: str, request: str, values: str = "") -> bool | None:
    """Whether the request shares a content lemma with the tool's name, description and parameters.

    A request whose lemmas the argument values hold whole ("金민서 님과 면담" as a title) tells nothing
    against the tool; any other must share one ("세탁기 돌려 줘" given ``set_light(room="세탁기")``
    shares none: declined). Two-letter lemmas or longer match when one opens with the
    other's first three fifths (주차비 and 주차); one-letter lemmas only whole (끄 and 끄). None when the
    tool is not described in Hangul and the request is: words cannot tell then (an English description
    of a Korean request), and code does not decline.
    """
    if HANGUL.search(request) and not HANGUL.search(tool_text):
        return None
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", tool_text).replace("_", " ")
    held = squash(values)
    a, b = lemmas(spaced), lemmas(request)
    if not {w for w in b if squash(w) not in held} or a & b:
        return True
    return _shares_word({w for w in a if len(w) >= 2}, {w for w in b if len(w) >= 2})


def _shares_word(a: set[str], b: set[str]) -> bool:
    """Whether a word of ``a`` and one of ``b`` open alike (the first two letters of the shorter, 3/5 of it)."""
    for x in a:
        for y in b:
            short, long_ = (x, y) if len(x) <= len(y) else (y, x)
            head = short[: max(2, -(-len(short) * 3 // 5))]
            if long_.startswith(head) or head in long_ and len(head) >= 2 and re.match(r"[가-힣]", head):
                return True
    return False


def tool_text(name: str, description: str, parameters: dict[str, Any]) -> str:
    """A tool's name, description and parameters (names, titles, descriptions) as one text."""
    props = parameters.get("properties") or {}
    return " ".join([name, description] + [_about(k, s) for k, s in props.items() if isinstance(s, dict)])


def ask_instead(tools: list[tuple[str, str, dict[str, Any]]], user_text: str) -> str | None:
    """The question to send instead of the model's direct reply, else None.

    The reply stands unless the message asks for an action (…해 줘: :func:`acts`) that one tool serves
    best by words (the most lemmas shared, :func:`related`), the message names no value (each of its
    nouns is a word of the tool) and that tool has required values: "알람 하나 맞춰 줘" answered "죄송합니다,
    알람을 맞출 수 없습니다" is asked "알람 시각을 알려 주세요." instead (the words give no time; with one,
    the model calls).
    """
    if not user_text or not acts(user_text):
        return None
    scored = [(_shared(tool_text(name, description, parameters), user_text), name, description, parameters)
              for name, description, parameters in tools if parameters.get("required")]
    best = max((n for n, *_ in scored), default=0)
    fits = [x for x in scored if x[0] == best]
    if best == 0 or len(fits) != 1 or related(tool_text(*fits[0][1:]), user_text) is not True:
        return None
    _, name, description, parameters = fits[0]
    about = lemmas(tool_text(name, description, parameters))
    if re.search(r"\d", user_text) or amounts(user_text) or any(
            not _shares_word({x for x in about if len(x) >= 2} | about, {w}) for w in lemmas(user_text, nouns=True)):
        return None  # a number, or a noun the tool does not name (서면역, 콤비네이션): a value given
    return ask_for([k for k in parameters["required"] if isinstance(k, str)], parameters)


def ground(name: str, description: str, arguments: dict[str, Any], parameters: dict[str, Any],
           user_text: str) -> Grounding:
    """Code's decision on the model's call ``name(arguments)`` for ``user_text`` (see the module)."""
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    text = user_text[-USER_TEXT_MAX:]
    flat = squash(text)
    written = _numbers(text)
    undated = _numbers(_DATED.sub(" ", text))
    request = _terms(text)
    out: dict[str, Any] = {}
    g = Grounding(out)
    derived_keys: set[str] = set()
    for key, value in arguments.items():
        schema: dict[str, Any] = props[key] if isinstance(props.get(key), dict) else {}
        about = _about(key, schema)
        ok: bool
        if isinstance(value, bool):  # (before numbers: a bool is an int)
            ok = not value or value == schema.get("default") or _shares_word(_terms(about) - {"use", "is", "여부"},
                                                                              request) \
                or bool(lemmas(about) & lemmas(text))  # 켜 줘 for "켜기(true)": the same verb (Kiwi)
            if not ok and key not in required:
                g.dropped.append(key)
                continue
        elif isinstance(value, int | float):
            usable = written if _OF_TIME.search(about) else undated
            ok = float(value) in usable
            if not ok:  # the one number the person wrote that no other argument holds (십오프로 read as 10)
                free = usable - {float(v) for k, v in arguments.items() if k != key and isinstance(v, int | float)}
                if len(free) == 1 and (fixed_n := free.pop()) >= 0:
                    fixed_v = int(fixed_n) if schema.get("type") == "integer" and fixed_n.is_integer() else fixed_n
                    g.snapped[key] = str(fixed_v)
                    value, ok = fixed_v, True
        elif isinstance(value, str):
            derived = "format" in schema or "pattern" in schema or CODES.search(about) or (
                bool(DERIVED.search(str(schema.get("description", "")))) and not AS_SAID.search(about)) or (
                "enum" in schema and all(isinstance(e, str) and re.fullmatch(r"[A-Z]{3}", e) for e in schema["enum"]))
            v = squash(value)
            if derived:
                derived_keys.add(key)
            if derived or not v:
                ok = True
            elif "enum" in schema:  # one of the tool's values: the person named it (a size nobody said is asked)
                ok = v in flat
            elif DIGIT_GROUPS.search(value):  # a long number: the person's digits in the person's grouping
                written_as = _digits_fix(value, text)
                ok = written_as is not None
                if written_as is not None and written_as != value.strip():
                    g.snapped[key] = written_as
                    value = written_as
            elif v in flat or key in required and all(squash(w) in flat for w in value.split()):
                ok = True  # the person's words, whole or (a required value) word by word ("金민서 면담" of
                # "金민서 님과 면담"); an optional value is a stretch as said ("아침 알람": no label was given)
            else:
                fixed = _near(value, text) or _trimmed(value, text)
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
    # A value said once fills one required parameter: "내일 부산 날씨" as search_flights(origin="부산",
    # destination="부산") names no second place (found on the report2 split).
    seen: set[str] = set()
    for key in [k for k in parameters.get("required") or [] if k in out]:
        v = squash(out[key]) if isinstance(out[key], str) and key not in derived_keys else ""
        if v and v in seen and flat.count(v) < 2:
            del out[key]
            g.missing.append(key)
        elif v:
            seen.add(v)
    g.missing += [k for k in parameters.get("required") or [] if k not in arguments and k not in g.missing]
    about = tool_text(name, description, parameters)
    shares = related(about, text, " ".join(str(v) for v in out.values() if isinstance(v, str)))
    if shares is None:  # words cannot tell: declined only when no required value is the person's
        shares = not g.missing or any(k in out for k in required) or _shares_word(_terms(about), request)
    g.related = shares
    return g


def _object_particle(word: str) -> str:
    last = word[-1:] if word else ""
    if "가" <= last <= "힣":
        return "을" if (ord(last) - 0xAC00) % 28 else "를"
    return "을(를)"


FORMAT_WORDS = frozenset("YYYY YY MM DD HH hh mm ss YYYY-MM-DD HH:MM".split())


def ask_for(missing: list[str], parameters: dict[str, Any]) -> str:
    """One question asking for exactly the ``missing`` values, named by their descriptions (or names)."""
    props = parameters.get("properties") or {}
    names = []
    for key in missing:
        schema: dict[str, Any] = props[key] if isinstance(props.get(key), dict) else {}
        label = str(schema.get("description") or schema.get("title") or key).strip().rstrip(".")
        label = re.split(r"[(:,;]| \(|\. ", label)[0].strip() or key
        words = label.split()  # "알람 시각 HH": the words before a format's letters
        cut = next((i for i, w in enumerate(words) if w.strip(".-/") in FORMAT_WORDS), len(words))
        label = " ".join(words[:cut]) or key
        if "enum" in schema and len(schema["enum"]) <= 6:
            label += f"({', '.join(str(v) for v in schema['enum'])} 중)"
        names.append(label)
    joined = ", ".join(names)
    return f"{joined}{_object_particle(names[-1].split('(')[0])} 알려 주세요."
