"""Korean date and time expressions resolved against a reference date, by code (never by the model).

A phrase as a notice writes it — ``3/15(금) 오후 3시``, ``다음 주 화요일 14:00``, ``2026년 3월 2일 ~
3월 9일 18시까지``, ``내일 오전 10시 30분`` — becomes a :class:`When` (a date, and a time where one is
written) or a :class:`Span` (a range, its end inheriting the start's date when only a time is given).

Stated rules (not fitted to any data):

- a date without a year is the nearest one to the reference date, a past one only within 60 days
  (a notice talks about the coming weeks); a weekday in brackets that does not fit that year moves
  the date a year on or back where it fits, else it is taken for a typo and the date stands;
- an hour of 1-7 written without 오전/오후 is read in the afternoon (business hours: ``3시 면접``);
  ``저녁``/``밤`` add 12 hours, ``새벽``/``아침``/``오전`` none; ``정오`` is 12:00, ``자정`` the day's
  end (23:59);
- ``이번 달 말`` / ``월말`` is the month's last day, ``다음 달 초`` the next month's 1st (a day
  without a time, so an all-day date);
- a week is Monday to Sunday: ``이번 주 금요일`` is that week's Friday, ``다음 주`` the next week's,
  ``금요일`` alone the next Friday from the reference date (the same day included); ``주말`` is the week's
  Saturday to Sunday (``다음 주말`` the next week's);
- ``밤 12시`` is 자정, ``새벽 12시`` and ``오전 12시`` the day's start; hours may be native numerals (``열두 시``);
  ``밤 1시`` to ``밤 5시`` are after midnight (``오늘 밤 1시`` is the next day's 01:00), ``밤 6시`` on the evening's;
- 시 is an hour's only where it ends the word (a particle, 반, 쯤, a space): not the 시 of 시작, 시험, 한시적;
- ``지난 금요일`` is the last Friday before the reference date; ``말`` and ``초`` name a month's end or start
  only after the month (이번 달 말, 월말, 3월 초), never alone (그 말);
- a dotted ``3.5`` is a number, not a date, when a comparison or a unit follows (``3.5 이상``, ``4.5점``), or
  when its one-digit day has no date's company (a weekday, a time, a range, 까지 …): ``평점 4.5``;
- a number before ``시간``, ``분간`` or ``동안`` is a duration (:func:`durations`), never a time of day, and
  ``1.5시간`` or ``1.5배`` is no date;
- a relative day (오늘, 내일, 금일 …) is one only as a word of its own: not the 금일 of ``입금일`` nor the 내일
  of ``내일배움카드``.

Every reader is one pass over the text (candidates from each pattern, sorted, swept once).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import partial

from services.runtime.korean.numbers import native_at
from services.runtime.korean.particles import _PARTICLE_RE, PARTICLES, ends_word, starts_word

WEEKDAYS = "월화수목금토일"
AFTER_MIDNIGHT = 5  # 밤 1-5시 are the night's hours after midnight (밤 6-11시 the evening's)
PAST_DAYS = 60

# Each pattern starts with the character it is anchored on (a digit, 요일, 주말, 말/초, 시), so a scan is one
# fast pass; what may stand before that anchor (이번 달, 다음 주, 오후) is read back from a few characters.
_ABS = re.compile(r"(?P<a>\d{1,4})\s*(?P<s1>년|월|[./-])\s*(?P<b>\d{1,2})(?:\s*(?P<s2>월|[./-])\s*(?P<c>\d{1,2}))?"
                  r"(?:\s*(?P<il>일))?(?!\d)")
_DAY_ONLY = re.compile(r"(?P<d>\d{1,2})\s*일(?![간\d])(?!\s*(?:동안|째|만에|치|분|이내|이상|내|전|후|뒤|간))")
_DAY_ONLY_BEFORE = re.compile(r"(?P<rel>이번\s*달|이번|다음\s*달|다음|내달|익월)\s*+(?:달\s*+)?$")
_WEEKDAY_PAREN = re.compile(r"\s*+[(（]\s*+(?P<w>[월화수목금토일])(?:요일)?\s*+[)）]")
_REL_DAY = {"오늘": 0, "금일": 0, "당일": 0, "내일": 1, "명일": 1, "익일": 1, "모레": 2, "내일모레": 2, "글피": 3}
_REL_DAY_RE = re.compile("|".join(sorted(_REL_DAY, key=len, reverse=True)))
# What may follow a relative day for it to be one: no letter, a particle, a time of day, another day word.
_REL_DAY_END = re.compile(r"(?![가-힣A-Za-z])|(?:" + "|".join(sorted(
    (*PARTICLES, *"중 안 내 오전 오후 아침 저녁 밤 새벽 낮 점심 정오 자정 날 자".split(),
     *_REL_DAY), key=len, reverse=True)) + ")")
_WEEK_RE = re.compile(r"(?P<w>[월화수목금토일])요일")
_WEEK_BEFORE = re.compile(r"(?P<rel>이번\s*주|금주|다음\s*주|차주|다다음\s*주|지난\s*주|저번\s*주|지난번|지난|저번)"
                          r"\s*$")
_WEEKEND_RE = re.compile(r"주말")
_WEEKEND_BEFORE = re.compile(r"(?P<rel>이번|금주|다음|차주|다다음|지난)\s*(?:주\s*)?$")
_MONTH_EDGE_RE = re.compile(r"(?P<edge>[말초])(?:일(?=$|[^가-힣]|까지|에|부터))?(?=$|[^가-힣]|까지|에|경|쯤|부터|마감)")
_MONTH_EDGE_BEFORE = re.compile(r"(?P<rel>이번\s*달|이달|금월|다음\s*달|내달|익월|(?P<m>\d{1,2})\s*월|월(?=$))\s*$")
_AFTER_RE = re.compile(r"(?P<n>\d{1,3})\s*(?P<unit>일|주)\s*(?:후|뒤)")
_NATIVE_HOUR = r"열두|열한|열|한|두|세|네|다섯|여섯|일곱|여덟|아홉"
_NATIVE_HOURS = {"열두": 12, "열한": 11, "열": 10, "한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7,
                 "여덟": 8, "아홉": 9}
_TIME_ANCHOR = re.compile(r"시(?!간)|:(?=\d{2}(?![\d:]))|정오|자정")
_MERIDIEM = r"오전|오후|아침|저녁|밤|새벽|낮|AM|PM|am|pm"
_HOUR_BEFORE = re.compile(rf"(?:(?P<mer>{_MERIDIEM})\s*)?(?P<h>\d{{1,2}}|{_NATIVE_HOUR})\s*$")
_MER_BEFORE = re.compile(rf"(?P<mer>{_MERIDIEM})\s*$")
# What may follow the 시 of an hour: no letter, a particle, or the words an hour takes (반, 쯤, 정각 …).
_HOUR_END = re.compile(rf"(?![가-힣A-Za-z])|(?:반|쯤|경|께|정각|즈음|엔|였|이었|라고|라서|면|{_PARTICLE_RE})")
_AFTER_HOUR = re.compile(r"\s*(?:(?P<min>\d{1,2})\s*분(?!간|\s*동안)|(?P<half>반))?")
_DURATION_RE = re.compile(
    rf"(?<![\d.])(?P<h>\d+(?:\.\d+)?|{_NATIVE_HOUR})\s*시간(?:\s*(?P<half>반)|\s*(?P<hmin>\d{{1,2}})\s*분)?"
    r"|(?<![\d.])(?P<min>\d{1,3})\s*분(?=\s*(?:간|동안|짜리|정도|쯤|소요|걸))")
_DATE_TIME_GAP = re.compile(r"[\s.,]*+(?:(?:[(（]?\s*+[월화수목금토일]요일\s*+[)）]?"
                            r"|[(（]\s*+[월화수목금토일]\s*+[)）])[\s.,]*+)?")
_QUANTITY_AFTER = re.compile(r"\s*+(?:이상|이하|미만|초과|이내|점|배|%|퍼센트|프로)")
_DATE_AFTER = re.compile(r"\s*+(?:[(（~∼〜–—.]|-|까지|부터|마감|에(?![가-힣])|에는|오전|오후|아침|저녁|밤|새벽"
                         r"|\d{1,2}\s*(?:시|:)"
                         r"|[월화수목금토일]요일|일(?![가-힣]))")
_RANGE_SPLIT = re.compile(r"\s*+(?:~|∼|〜|–|—|부터|에서|-(?=\s*+(?:\d|오전|오후)))\s*+")


@dataclass(frozen=True)
class When:
    """A resolved point: its date, its time where one is written, and the characters it came from."""

    day: date
    at: time | None
    start: int
    end: int
    night: bool = False  # "오늘 밤 1시": the day after the date written (its after-midnight hour)


@dataclass(frozen=True)
class Span:
    """A resolved phrase: its start and, for a range, its end."""

    start: When
    end: When | None


@dataclass(frozen=True)
class Duration:
    """A length of time as written (``2시간 동안``, ``한 시간 반``, ``30분간``): minutes and where it is."""

    minutes: float
    start: int
    end: int


@dataclass(frozen=True)
class _Candidate:
    start: int
    end: int
    resolve: Callable[[date], date | None]
    weak: bool = False  # a day of the month alone ("20일"): only where nothing else reads the words
    until: Callable[[date], date | None] | None = None  # a phrase that is a range itself (주말: Saturday-Sunday)


def _year_for(month: int, day: int, ref: date) -> date | None:
    best: date | None = None
    for year in (ref.year - 1, ref.year, ref.year + 1):
        try:
            d = date(year, month, day)
        except ValueError:
            continue
        if d < ref - timedelta(days=PAST_DAYS):
            continue
        if best is None or abs((d - ref).days) < abs((best - ref).days):
            best = d
    return best


def _fit_weekday(d: date, weekday: int, explicit_year: bool, ref: date) -> date:
    """The date moved a year on or back where its weekday fits (not before the past window); else as written."""
    if d.weekday() == weekday or explicit_year:
        return d
    for shift in (1, -1):
        try:
            other = d.replace(year=d.year + shift)
        except ValueError:
            continue
        if other.weekday() == weekday and other >= ref - timedelta(days=PAST_DAYS):
            return other
    return d


def _month_edge(rel: str, month_written: str | None, edge: str, ref: date) -> date:
    """``이번 달 말`` (the month's last day), ``다음 달 초`` (its 1st), ``3월 말``; alone, this month's."""
    rel = re.sub(r"\s", "", rel)
    year, month = ref.year, ref.month
    if month_written:
        month = int(month_written)
        if not 1 <= month <= 12:
            month = ref.month
        elif month < ref.month and (ref.month - month) * 30 > PAST_DAYS:
            year += 1
    elif rel in ("다음달", "내달", "익월"):
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    if edge == "초":
        return date(year, month, 1)
    nxt = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return nxt - timedelta(days=1)


def _week_monday(rel: str, ref: date) -> date:
    monday = ref - timedelta(days=ref.weekday())
    shift = {"다음주": 7, "차주": 7, "다다음주": 14, "지난주": -7, "저번주": -7}.get(rel, 0)
    return monday + timedelta(days=shift)


def _before(pattern: re.Pattern[str], text: str, at: int, width: int = 10) -> re.Match[str] | None:
    """``pattern`` (ending in ``$``) matched against the few characters before ``at``."""
    lo = max(0, at - width)
    return pattern.search(text[lo:at])


def _absolute(text: str, m: re.Match[str]) -> _Candidate | None:
    if m.start() > 0 and text[m.start() - 1] in "0123456789.,":
        return None
    if m["c"] is not None:  # year, month, day
        if m["s1"] not in "년./-" or len(m["a"]) not in (2, 4) or (m["s2"] == "월") != (m["s1"] == "년"):
            return None
        y: int | None = int(m["a"])
        month, day, sep = int(m["b"]), int(m["c"]), m["s2"]
    else:
        if m["s1"] == "년" or len(m["a"]) > 2:
            return None
        y, month, day, sep = None, int(m["a"]), int(m["b"]), m["s1"]
    end = m.end()
    if sep != "월" and not m["il"]:
        # "1.5시간", "3.5만원", "1.5배": a decimal number, not a date
        if end < len(text) and (text[end] in "만천억조원배점개명%" or re.match(r"[가-힣A-Za-z]", text[end])
                                and not ends_word(text, end)):
            return None
        if sep == "." and _QUANTITY_AFTER.match(text, end):
            return None  # "학점 3.5 이상", "4.5 점": a number compared or counted, not a date
        if sep == "." and len(m["b"]) == 1 and not _DATE_AFTER.match(text, end):
            return None  # "평점 4.5": a one-digit day written with a dot needs a date's company (요일, a time …)
    w = _WEEKDAY_PAREN.match(text, end)
    if w:
        end = w.end()

    def resolve(ref: date) -> date | None:
        if y is not None:
            year = y + 2000 if y < 100 else y
            try:
                d: date | None = date(year, month, day)
            except ValueError:
                return None
        else:
            d = _year_for(month, day, ref) if 1 <= month <= 12 else None
        if d is not None and w:
            d = _fit_weekday(d, WEEKDAYS.index(w["w"]), y is not None, ref)
        return d

    return _Candidate(m.start(), end, resolve)


def _day_only(text: str, m: re.Match[str]) -> _Candidate | None:
    if m.start() > 0 and text[m.start() - 1] in "0123456789.,":
        return None
    day = int(m["d"])
    back = _before(_DAY_ONLY_BEFORE, text, m.start())
    rel = re.sub(r"\s", "", back["rel"]) if back else ""

    def resolve(ref: date) -> date | None:
        year, month = ref.year, ref.month
        if rel in ("다음", "다음달", "내달", "익월"):
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        try:
            d = date(year, month, day)
        except ValueError:
            return None
        if not rel and d < ref:  # "20일" after the 20th: next month's
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            try:
                d = date(year, month, day)
            except ValueError:
                return None
        return d

    start = m.start() - (len(back.group()) if back else 0)
    return _Candidate(start, m.end(), resolve, weak=True)


def _days_after(n: int, ref: date) -> date:
    return ref + timedelta(days=n)


def _sunday_of(saturday: Callable[[date], date], ref: date) -> date:
    sat = saturday(ref)
    return sat + timedelta(days=6 - sat.weekday())


def _candidates(text: str) -> list[_Candidate]:
    """Every date phrase's candidate reading, in order, overlaps resolved (leftmost, then longest)."""
    found: list[_Candidate] = []
    for m in _ABS.finditer(text):
        c = _absolute(text, m)
        if c is not None:
            found.append(c)
    for m in _REL_DAY_RE.finditer(text):
        if starts_word(text, m.start()) and _REL_DAY_END.match(text, m.end()):
            n = _REL_DAY[m.group()]
            found.append(_Candidate(m.start(), m.end(), partial(_days_after, n)))
    for m in _WEEK_RE.finditer(text):
        back = _before(_WEEK_BEFORE, text, m.start())
        weekday, rel = WEEKDAYS.index(m["w"]), re.sub(r"\s", "", back["rel"]) if back else ""

        def week(ref: date, weekday: int = weekday, rel: str = rel) -> date:
            if rel in ("지난", "저번", "지난번"):  # "지난 금요일": the last one before today
                return ref - timedelta(days=(ref.weekday() - weekday) % 7 or 7)
            if rel:
                return _week_monday(rel, ref) + timedelta(days=weekday)
            return ref + timedelta(days=(weekday - ref.weekday()) % 7)
        found.append(_Candidate(m.start() - (len(back.group()) if back else 0), m.end(), week))
    for m in _WEEKEND_RE.finditer(text):
        back = _before(_WEEKEND_BEFORE, text, m.start())
        word = back["rel"] if back else ""
        rel = {"이번": "이번주", "다음": "다음주", "다다음": "다다음주", "지난": "지난주"}.get(word, word)

        def saturday(ref: date, rel: str = rel) -> date:
            sat = _week_monday(rel, ref) + timedelta(days=5)
            return ref if not rel and ref > sat else sat
        found.append(_Candidate(m.start() - (len(back.group()) if back else 0), m.end(), saturday,
                                until=partial(_sunday_of, saturday)))
    for m in _AFTER_RE.finditer(text):
        if m.start() > 0 and text[m.start() - 1] in "0123456789.":
            continue
        n = int(m["n"]) * (7 if m["unit"] == "주" else 1)
        found.append(_Candidate(m.start(), m.end(), partial(_days_after, n)))
    for m in _MONTH_EDGE_RE.finditer(text):
        back = _before(_MONTH_EDGE_BEFORE, text, m.start())
        if back is None:
            continue  # 말 and 초 alone are words (그 말, 몇 초): a month's end or start names its month
        if back is not None and back["rel"] == "월" and back.end() - back.start() != 1:
            continue  # 월말 only as one word
        start = m.start() - (len(back.group()) if back else 0)
        rel, month = (back["rel"], back["m"]) if back else ("", None)
        found.append(_Candidate(start, m.end(), partial(_month_edge, rel, month, m["edge"])))
    for m in _DAY_ONLY.finditer(text):
        c = _day_only(text, m)
        if c is not None:
            found.append(c)
    found.sort(key=lambda c: (c.start, c.weak, -c.end))
    out: list[_Candidate] = []
    for c in found:
        if out and c.start < out[-1].end:
            continue
        out.append(c)
    return out


@dataclass(frozen=True)
class _TimeWords:
    """A time of day as written: the meridiem word, the hour (digits or native), minutes, 반, or 정오/자정."""

    start: int
    end: int
    mer: str
    hour: int
    minute: int
    digits: bool  # an hour in digits ("3시", "14:00"); a native one is "세 시"
    word: str = ""
    clock: bool = False  # "14:00", "07:30": a 24-hour clock, no afternoon implied


def _time_words_at(text: str, anchor: re.Match[str]) -> _TimeWords | None:
    """The time of day around one anchor (시, :, 정오, 자정), or None."""
    a = anchor.group()
    if a in ("정오", "자정"):
        back = _before(_MER_BEFORE, text, anchor.start(), 6)
        start = anchor.start() - (len(back.group()) if back else 0)
        return _TimeWords(start, anchor.end(), back["mer"] if back else "", 12, 0, True, a)
    lo = max(0, anchor.start() - 10)
    m = _HOUR_BEFORE.search(text[lo:anchor.start()])
    if m is None:
        return None
    h_start = lo + m.start("h")
    h = m["h"]
    if h.isdigit():
        if h_start > 0 and text[h_start - 1] in "0123456789.:":
            return None
        hour = int(h)
    else:
        if not starts_word(text, h_start):
            return None
        hour = _NATIVE_HOURS[h]
    start = lo + m.start()
    if a == ":":
        if not h.isdigit():
            return None
        minute = int(text[anchor.end():anchor.end() + 2])
        return _TimeWords(start, anchor.end() + 2, m["mer"] or "", hour, minute, True, clock=True)
    if not _HOUR_END.match(text, anchor.end()):
        return None  # 시작, 시험, 한시적: 시 begins another word
    tail = _AFTER_HOUR.match(text, anchor.end())
    minute = 0
    end = anchor.end()
    if tail and (tail["min"] or tail["half"]):
        minute = int(tail["min"]) if tail["min"] else 30
        end = tail.end()
    return _TimeWords(start, end, m["mer"] or "", hour, minute, h.isdigit())


def _resolve_time(w: _TimeWords) -> time | None:
    if w.word:
        return time(12, 0) if w.word == "정오" else time(23, 59)
    hour, minute = w.hour, w.minute
    mer = w.mer.lower()
    if mer in ("밤", "저녁") and hour == 12:
        return time(23, 59)  # 밤 12시: 자정
    if mer == "밤" and 1 <= hour <= AFTER_MIDNIGHT:
        pass  # 밤 1시: the night's 1 o'clock, after midnight (the day after the date it follows)
    elif mer in ("오후", "저녁", "밤", "pm") and hour < 12:
        hour += 12
    elif mer in ("오전", "새벽", "아침", "am") and hour == 12:
        hour = 0
    elif mer == "낮" and hour < 7:
        hour += 12
    elif not mer and not w.clock and 1 <= hour <= 7:
        hour += 12  # "3시 면접": business hours
    if hour == 24 and minute == 0:
        return time(23, 59)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return time(hour, minute)


def _times(text: str, pos: int = 0, endpos: int | None = None) -> list[tuple[_TimeWords, time]]:
    """The times of day in ``text[pos:endpos]``, in order."""
    out = []
    for anchor in _TIME_ANCHOR.finditer(text, pos, len(text) if endpos is None else endpos):
        w = _time_words_at(text, anchor)
        if w is None or w.start < pos:
            continue
        t = _resolve_time(w)
        if t is not None:
            out.append((w, t))
    return out


def _time_starting(text: str, at: int) -> tuple[_TimeWords, time] | None:
    """The time of day that starts exactly at ``at`` (``오후 3시``, ``14:00``), or None."""
    for w, t in _times(text, at, min(len(text), at + 16)):
        return (w, t) if w.start == at else None
    return None


def _time_at(text: str) -> tuple[time, int, int] | None:
    """The first time of day in ``text``: (time, start, end) or None."""
    found = _times(text)
    if not found:
        return None
    w, t = found[0]
    return t, w.start, w.end


def time_of_day(text: str) -> time | None:
    """The first time of day ``text`` writes (``오후 3시``, ``밤 열두 시``, ``14:30``), or None."""
    found = _time_at(text)
    return found[0] if found else None


def durations(text: str) -> list[Duration]:
    """Every length of time in ``text`` (``2시간 동안``, ``한 시간 반``, ``1.5시간``, ``30분간``), in order."""
    out = []
    for m in _DURATION_RE.finditer(text):
        if m["h"] is not None:
            h = m["h"]
            if not h[0].isdigit():
                native = native_at(text, m.start("h"))
                if native is None:
                    continue
                hours = float(native[0])
            else:
                hours = float(h)
            minutes = hours * 60 + (30 if m["half"] else 0) + int(m["hmin"] or 0)
        else:
            minutes = float(m["min"])
        out.append(Duration(minutes, m.start(), m.end()))
    return out


def _when_of(text: str, c: _Candidate, ref: date, offset: int = 0) -> When | None:
    day = c.resolve(ref)
    if day is None:
        return None
    end = c.end
    gap = _DATE_TIME_GAP.match(text, end)  # "12월 12일 토요일 오전 9시", "2026. 12. 15. (화) 14:00"
    after = gap.end() if gap else end
    at = None
    window = text[after:after + 16]
    t = _time_starting(text, after) if "시" in window or ":" in window or "정오" in window or "자정" in window \
        else None
    night = False
    if t is not None:
        at, end = t[1], t[0].end
        if t[0].mer == "밤" and at.hour <= AFTER_MIDNIGHT:
            day, night = day + timedelta(days=1), True  # "오늘 밤 1시": tonight, after midnight
    return When(day, at, offset + c.start, offset + end, night)


def _span_at(text: str, cands: list[_Candidate], i: int, ref: date) -> tuple[Span, int] | None:
    """The phrase starting at candidate ``i``: its span and the index of the next candidate not used."""
    first = _when_of(text, cands[i], ref)
    if first is None:
        return None
    until = cands[i].until
    if until is not None and _RANGE_SPLIT.match(text, first.end) is None:
        last = until(ref)
        return Span(first, When(last, None, first.start, first.end) if last and last != first.day else None), i + 1
    sep = _RANGE_SPLIT.match(text, first.end)
    if not sep:
        return Span(first, None), i + 1
    if i + 1 < len(cands) and cands[i + 1].start == sep.end():
        second = _when_of(text, cands[i + 1], first.day)
        if second is not None:
            return Span(first, second), i + 2
    t = _time_starting(text, sep.end())
    if t is not None:
        words, at = t
        if first.at is not None and at < first.at and at.hour < 12 and first.at.hour >= 12:
            at = time(at.hour + 12, at.minute)  # "오후 2시~4시" is 14:00-16:00
        return Span(first, When(first.day, at, words.start, words.end)), i + 1
    return Span(first, None), i + 1


def _date_at(text: str, ref: date) -> tuple[date, int, int] | None:
    """The first date in ``text``: (day, start, end) or None."""
    for c in _candidates(text):
        d = c.resolve(ref)
        if d is not None:
            return d, c.start, c.end
    return None


def when(text: str, ref: date, *, offset: int = 0) -> When | None:
    """The date (and time) one phrase names, or None when it names no date."""
    for c in _candidates(text):
        w = _when_of(text, c, ref, offset)
        if w is not None:
            return w
    return None


def span(text: str, ref: date) -> Span | None:
    """A phrase as a start and, where it is a range (``~``, ``-``, ``부터 … 까지``, ``주말``), an end."""
    cands = _candidates(text)
    for i in range(len(cands)):
        found = _span_at(text, cands, i, ref)
        if found is not None:
            return found[0]
    return None


def scan(text: str, ref: date) -> list[Span]:
    """Every date phrase in ``text``, in order (a range counted once); one pass."""
    cands = _candidates(text)
    out: list[Span] = []
    i = 0
    while i < len(cands):
        found = _span_at(text, cands, i, ref)
        if found is None:
            i += 1
            continue
        s, i = found
        out.append(s)
    return out


def iso(w: When, tz, *, end_of_day: bool) -> str:
    """ISO 8601 with the zone's offset; a date without a time is the day's start, or its end for an end."""
    at = w.at or (time(23, 59, 59) if end_of_day else time(0, 0))
    return datetime.combine(w.day, at, tzinfo=tz).isoformat()
