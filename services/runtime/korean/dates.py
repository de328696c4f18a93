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
  ``금요일`` alone the next Friday from the reference date (the same day included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

WEEKDAYS = "월화수목금토일"
PAST_DAYS = 60

_YEAR = r"(?:(?P<y>\d{4}|\d{2})\s*(?:년|[./-])\s*)?"
_ABS = re.compile(_YEAR + r"(?P<m>\d{1,2})\s*(?:월|[./-])\s*(?P<d>\d{1,2})\s*일?(?!\d)")
_MONTH_DAY_ONLY = re.compile(r"(?P<rel>이번|이번\s*달|다음|다음\s*달|내달|익월)?\s*달?\s*(?P<d>\d{1,2})\s*일(?![간\d])")
_WEEKDAY_PAREN = re.compile(r"\s*[(（]\s*(?P<w>[월화수목금토일])(?:요일)?\s*[)）]")
_REL_DAY = {"오늘": 0, "금일": 0, "당일": 0, "내일": 1, "명일": 1, "익일": 1, "모레": 2, "내일모레": 2, "글피": 3}
_REL_DAY_RE = re.compile("|".join(sorted(_REL_DAY, key=len, reverse=True)))
_WEEK_RE = re.compile(r"(?P<rel>이번\s*주|금주|다음\s*주|차주|다다음\s*주|지난\s*주)?\s*(?P<w>[월화수목금토일])요일")
_MONTH_EDGE_RE = re.compile(r"(?P<rel>이번\s*달|이달|금월|다음\s*달|내달|익월|(?P<m>\d{1,2})\s*월|월(?=말))?\s*"
                            r"(?P<edge>말|초)(?:일(?=$|[^가-힣]|까지|에|부터))?(?=$|[^가-힣]|까지|에|경|쯤|부터|마감)")
_AFTER_RE = re.compile(r"(?P<n>\d{1,3})\s*(?P<unit>일|주)\s*(?:후|뒤)")
_TIME_RE = re.compile(
    r"(?P<mer>오전|오후|아침|저녁|밤|새벽|낮|AM|PM|am|pm)?\s*"
    r"(?:(?P<h>\d{1,2})\s*시\s*(?:(?P<min>\d{1,2})\s*분|(?P<half>반))?|(?P<hh>\d{1,2}):(?P<mm>\d{2})|(?P<word>정오|자정))")
_DATE_TIME_GAP = re.compile(r"[\s.,]*(?:[(（]?\s*[월화수목금토일]요일\s*[)）]?|[(（]\s*[월화수목금토일]\s*[)）])?"
                            r"[\s.,]*")
_RANGE_SPLIT = re.compile(r"\s*(?:~|∼|〜|–|—|부터|에서|-(?=\s*(?:\d|오전|오후)))\s*")


@dataclass(frozen=True)
class When:
    """A resolved point: its date, its time where one is written, and the characters it came from."""

    day: date
    at: time | None
    start: int
    end: int


@dataclass(frozen=True)
class Span:
    """A resolved phrase: its start and, for a range, its end."""

    start: When
    end: When | None


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


def _month_edge(m: re.Match, ref: date) -> date:
    """``이번 달 말`` (the month's last day), ``다음 달 초`` (its 1st), ``3월 말``; alone, this month's."""
    rel = re.sub(r"\s", "", m["rel"] or "")
    year, month = ref.year, ref.month
    if m["m"]:
        month = int(m["m"])
        if not 1 <= month <= 12:
            month = ref.month
        elif month < ref.month and (ref.month - month) * 30 > PAST_DAYS:
            year += 1
    elif rel in ("다음달", "내달", "익월"):
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    if m["edge"] == "초":
        return date(year, month, 1)
    nxt = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return nxt - timedelta(days=1)


def _date_at(text: str, ref: date) -> tuple[date, int, int] | None:
    """The first date in ``text``: (day, start, end) or None."""
    found: list[tuple[int, int, date]] = []
    m = _ABS.search(text)
    if m:
        month, day = int(m["m"]), int(m["d"])
        explicit = m["y"] is not None
        if explicit:
            year = int(m["y"])
            year = year + 2000 if year < 100 else year
            try:
                d: date | None = date(year, month, day)
            except ValueError:
                d = None
        else:
            d = _year_for(month, day, ref) if 1 <= month <= 12 else None
        if d is not None:
            end = m.end()
            w = _WEEKDAY_PAREN.match(text, end)
            if w:
                d = _fit_weekday(d, WEEKDAYS.index(w["w"]), explicit, ref)
                end = w.end()
            found.append((m.start(), end, d))
    m2 = _REL_DAY_RE.search(text)
    if m2:
        found.append((m2.start(), m2.end(), ref + timedelta(days=_REL_DAY[m2.group()])))
    m3 = _WEEK_RE.search(text)
    if m3:
        weekday = WEEKDAYS.index(m3["w"])
        rel = re.sub(r"\s", "", m3["rel"] or "")
        monday = ref - timedelta(days=ref.weekday())
        if rel in ("이번주", "금주"):
            d3 = monday + timedelta(days=weekday)
        elif rel in ("다음주", "차주"):
            d3 = monday + timedelta(days=7 + weekday)
        elif rel == "다다음주":
            d3 = monday + timedelta(days=14 + weekday)
        elif rel == "지난주":
            d3 = monday + timedelta(days=weekday - 7)
        else:
            d3 = ref + timedelta(days=(weekday - ref.weekday()) % 7)
        found.append((m3.start(), m3.end(), d3))
    m4 = _AFTER_RE.search(text)
    if m4:
        n = int(m4["n"]) * (7 if m4["unit"] == "주" else 1)
        found.append((m4.start(), m4.end(), ref + timedelta(days=n)))
    m6 = _MONTH_EDGE_RE.search(text)
    if m6 and (m6["rel"] or m6.start() == 0 or text[m6.start() - 1] in " (,"):
        found.append((m6.start(), m6.end(), _month_edge(m6, ref)))
    if not found:
        m5 = _MONTH_DAY_ONLY.search(text)
        if m5:
            day = int(m5["d"])
            rel = re.sub(r"\s", "", m5["rel"] or "")
            year, month = ref.year, ref.month
            if rel in ("다음", "다음달", "내달", "익월"):
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            try:
                d5 = date(year, month, day)
            except ValueError:
                return None
            if not rel and d5 < ref:  # "20일" after the 20th: next month's
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                try:
                    d5 = date(year, month, day)
                except ValueError:
                    return None
            found.append((m5.start(), m5.end(), d5))
    if not found:
        return None
    start, end, d = min(found, key=lambda f: f[0])
    return d, start, end


def _time_at(text: str) -> tuple[time, int, int] | None:
    """The first time of day in ``text``: (time, start, end) or None."""
    m = _TIME_RE.search(text)
    if not m:
        return None
    if m["word"]:
        return (time(12, 0) if m["word"] == "정오" else time(23, 59)), m.start(), m.end()
    if m["h"] is not None:
        hour, minute = int(m["h"]), int(m["min"] or 0) + (30 if m["half"] else 0)
    else:
        hour, minute = int(m["hh"]), int(m["mm"])
    mer = (m["mer"] or "").lower()
    if mer in ("오후", "저녁", "밤", "pm") and hour < 12:
        hour += 12
    elif mer in ("오전", "새벽", "아침", "am") and hour == 12:
        hour = 0
    elif mer == "낮" and hour < 7:
        hour += 12
    elif not mer and m["h"] is not None and 1 <= hour <= 7:
        hour += 12  # "3시 면접": business hours
    if hour == 24 and minute == 0:
        return time(23, 59), m.start(), m.end()
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return time(hour, minute), m.start(), m.end()


def when(text: str, ref: date, *, offset: int = 0) -> When | None:
    """The date (and time) one phrase names, or None when it names no date."""
    d = _date_at(text, ref)
    if d is None:
        return None
    day, start, end = d
    gap = _DATE_TIME_GAP.match(text, end)  # "12월 12일 토요일 오전 9시", "2026. 12. 15. (화) 14:00"
    after = gap.end() if gap else end
    t = _time_at(text[after:])
    at = None
    if t is not None and not text[after:after + t[1]].strip(" ,"):  # a time right after the date is its time
        at, end = t[0], after + t[2]
    return When(day, at, offset + start, offset + end)


def span(text: str, ref: date) -> Span | None:
    """A phrase as a start and, where it is a range (``~``, ``-``, ``부터 … 까지``), an end."""
    first = when(text, ref)
    if first is None:
        return None
    rest = text[first.end:]
    sep = _RANGE_SPLIT.match(rest)
    if not sep:
        return Span(first, None)
    tail = rest[sep.end():]
    offset = first.end + sep.end()
    second = when(tail, first.day, offset=offset)
    if second is not None and not text[offset:second.start].strip():
        return Span(first, second)
    t = _time_at(tail)
    if t is not None and not tail[:t[1]].strip():  # "오후 2시~4시": the same day
        at = t[0]
        if first.at is not None and at < first.at and at.hour < 12 and first.at.hour >= 12:
            at = time(at.hour + 12, at.minute)  # "오후 2시~4시" is 14:00-16:00
        return Span(first, When(first.day, at, offset + t[1], offset + t[2]))
    return Span(first, None)


def scan(text: str, ref: date) -> list[Span]:
    """Every date phrase in ``text``, in order (a range counted once)."""
    out: list[Span] = []
    pos = 0
    while pos < len(text):
        s = span(text[pos:], ref)
        if s is None:
            break
        start = When(s.start.day, s.start.at, s.start.start + pos, s.start.end + pos)
        end = When(s.end.day, s.end.at, s.end.start + pos, s.end.end + pos) if s.end else None
        out.append(Span(start, end))
        pos += (s.end or s.start).end
    return out


def iso(w: When, tz, *, end_of_day: bool) -> str:
    """ISO 8601 with the zone's offset; a date without a time is the day's start, or its end for an end."""
    at = w.at or (time(23, 59, 59) if end_of_day else time(0, 0))
    return datetime.combine(w.day, at, tzinfo=tz).isoformat()
