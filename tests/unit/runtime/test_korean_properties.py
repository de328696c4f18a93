"""Round trips: values and dates rendered in the forms people write, read back by code (Hypothesis).

Each strategy renders a random value in every form a person writes it (digits, commas, Korean units with
digits or Sino-Korean numerals, spacing, particles, a sentence around it) and the reader must give the
value back; counters and words that hold a numeral's syllable must give no amount. The examples are
bounded (``max_examples``) so the default run stays quick.
"""

from __future__ import annotations

from datetime import date, time, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from services.runtime.korean import dates
from services.runtime.korean.amounts import amounts
from services.runtime.korean.numbers import numbers

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)
REF = date(2026, 12, 7)  # a Monday
SINO_DIGITS = "영일이삼사오육칠팔구"
LEADS = ["", "예산은 ", "가격이 ", "총 ", "연봉 ", "대략 ", "선물 ", "(", "금액: "]
TAILS = ["", " 정도", "짜리", "이요", "이에요", "을 보내 줘", "에 살 수 있어?", ")", "입니다.", " 선에서"]
BOUNDS = {"이하": "max", "이내": "max", "미만": "max", "까지": "max", "이상": "min", "초과": "min", "부터": "min",
          "넘게": "min", "정도": "about", "쯤": "about", "안팎": "about", "내외": "about", "가량": "about"}


def _sino_group(n: int, *, drop_one: bool) -> str:
    """0 < n < 10,000 in Sino-Korean numerals (천오백, 이천삼); 일 left out before a unit when ``drop_one``."""
    out = ""
    for unit, place in (("천", 1000), ("백", 100), ("십", 10)):
        d = n // place % 10
        if d:
            out += ("" if d == 1 and drop_one else SINO_DIGITS[d]) + unit
    if n % 10:
        out += SINO_DIGITS[n % 10]
    return out


def _mixed_group(n: int) -> str:
    """0 < n < 10,000 with digits before small units (3천5백, 2천, 5백50)."""
    out = ""
    for unit, place in (("천", 1000), ("백", 100)):
        d = n // place % 10
        if d:
            out += f"{d}{unit}"
    rest = n % 100
    return out + (str(rest) if rest else "")


@st.composite
def rendered_amounts(draw) -> tuple[str, int]:
    """(text, value) of a won amount written as a person might."""
    value = draw(st.one_of(st.integers(100, 9_999), st.integers(10_000, 99_999_999),
                           st.integers(100_000_000, 999_999_999_999)).map(lambda v: v // 100 * 100 or 100))
    form = draw(st.sampled_from(["commas", "plain", "units_digits", "units_mixed", "units_sino"]))
    groups = [(value // 10**12 % 10_000, "조"), (value // 10**8 % 10_000, "억"), (value // 10**4 % 10_000, "만"),
              (value % 10_000, "")]
    # A last group below 만 written with units after a large unit and no 만 group reads as the colloquial 3억5천
    # (3억 5천만), and a last lone digit as 3만5 (35,000): those values are written in digits, as people do.
    lowest_alone = groups[3][0] and value >= 10**8 and not groups[2][0]
    if form in ("units_digits", "units_mixed", "units_sino") and (lowest_alone or value < 10_000):
        form = "commas"
    if form == "commas":
        number = f"{value:,}"
    elif form == "plain":
        number = str(value)
    else:
        space = draw(st.sampled_from(["", " "]))
        parts = []
        for n, unit in groups:
            if not n:
                continue
            if form == "units_digits":
                parts.append(f"{n}{unit}")
            elif form == "units_mixed":
                parts.append(f"{_mixed_group(n)}{unit}")
            else:
                parts.append(f"{_sino_group(n, drop_one=bool(unit) and n == 1 or n >= 10)}{unit}")
        number = space.join(parts)
    won = draw(st.sampled_from(["원", " 원"]))
    return draw(st.sampled_from(LEADS)) + number + won + draw(st.sampled_from(TAILS)), value


@SETTINGS
@given(rendered_amounts())
def test_every_written_amount_reads_back(case):
    text, value = case
    found = amounts(text)
    assert [a.value for a in found] == [value], text


@SETTINGS
@given(st.integers(1, 999), st.sampled_from(["만", "천", "백만", "억", ""]), st.sampled_from(
    ["명", "개", "회", "번", "보", "점", "건", "권", "장", "마리", "시간", "km", "kg", "ml", "GB", "층", "년",
     "개월", "살"]),
    st.sampled_from(["", " "]), st.sampled_from(["", "이", "을", "의", " 돌파", "가 넘어요"]))
def test_a_count_is_no_amount(n, unit, counter, space, tail):
    text = f"팔로워 {n}{unit}{space}{counter}{tail}"
    assert amounts(text) == [], text


@SETTINGS
@given(st.integers(1, 999), st.sampled_from(["만", "천"]), st.sampled_from(sorted(BOUNDS)), st.sampled_from(["", " "]))
def test_the_word_after_an_amount_sets_its_bound(n, unit, word, space):
    found = amounts(f"{n}{unit} 원{space}{word} 선물")
    assert [(a.value, a.bound) for a in found] == [(n * (10_000 if unit == "만" else 1_000), BOUNDS[word])]


@SETTINGS
@given(st.integers(1, 99).filter(lambda d: d % 10), st.sampled_from([(10_000, "만"), (100_000_000, "억")]))
def test_dae_is_the_range_of_the_last_digit(d, unit):
    value, word = unit
    found = amounts(f"{d}{word}원대 시계")
    # d has no trailing zero, so its last written digit is in the unit's place: 3만원대 30,000-39,999, 15만원대
    # 150,000-159,999
    assert [(a.value, a.high) for a in found] == [(d * value, d * value + value - 1)]


@SETTINGS
@given(st.sampled_from(["오", "이", "삼", "사", "구", "천", "만", "억", "조", "백", "십"]),
       st.text(alphabet="가나다라마바사아자차카타파하들약울장나서", min_size=1, max_size=3))
def test_a_numeral_syllable_inside_a_word_is_no_amount(syllable, rest):
    assert amounts(f"{syllable}{rest} 가지 이유가 있어요") == []


@st.composite
def rendered_dates(draw) -> tuple[str, date, time | None]:
    """(text, date, time) of a date (and maybe a time) written as a notice or a person writes it."""
    day = REF + timedelta(days=draw(st.integers(-55, 290)))
    form = draw(st.sampled_from(["korean", "slash", "dot", "year_korean", "iso_dots", "korean_weekday"]))
    wd = "월화수목금토일"[day.weekday()]
    text = {"korean": f"{day.month}월 {day.day}일", "slash": f"{day.month}/{day.day}",
            "dot": f"{day.month}.{day.day}({wd})", "year_korean": f"{day.year}년 {day.month}월 {day.day}일",
            "iso_dots": f"{day.year}. {day.month:02d}. {day.day:02d}.",
            "korean_weekday": f"{day.month}월 {day.day}일 ({wd})"}[form]
    at: time | None = None
    if draw(st.booleans()):
        hour = draw(st.integers(0, 23))
        minute = draw(st.sampled_from([0, 0, 30, 15, 45]))
        tform = draw(st.sampled_from(["clock", "meridiem"]))
        if tform == "clock":
            text += f" {hour:02d}:{minute:02d}"
        else:
            mer = "오전" if hour < 12 else "오후"
            h12 = hour % 12 or 12
            if hour == 0:
                mer = "새벽"
            mins = "" if minute == 0 else (" 반" if minute == 30 else f" {minute}분")
            text += f" {mer} {h12}시{mins}"
        at = time(hour, minute)
    lead = draw(st.sampled_from(["", "면접은 ", "접수 마감: ", "입금일: ", "행사 일시 "]))
    tail = draw(st.sampled_from(["", "까지", "에 만나요", " 예정입니다.", "부터 시작"]))
    return lead + text + tail, day, at


@SETTINGS
@given(rendered_dates())
def test_every_written_date_reads_back(case):
    text, day, at = case
    spans = dates.scan(text, REF)
    assert spans, text
    assert (spans[0].start.day, spans[0].start.at) == (day, at), text


@SETTINGS
@given(st.sampled_from(sorted(dates._REL_DAY)), st.text(alphabet="입송적환국민배움채카드공제들", min_size=1,
       max_size=2),
       st.text(alphabet="배움카드채공제신청", min_size=0, max_size=2))
def test_a_relative_day_inside_a_word_is_none(word, before, after):
    text = f"{before}{word}{after} 안내"
    assert dates.scan(text, REF) == [], text


@SETTINGS
@given(st.sampled_from(sorted(dates._REL_DAY)), st.sampled_from(["", "은", "까지", " 오후 3시", "에", " 중으로"]))
def test_a_relative_day_as_a_word_reads(word, tail):
    spans = dates.scan(f"마감은 {word}{tail}", REF)
    assert spans and spans[0].start.day == REF + timedelta(days=dates._REL_DAY[word])


NATIVE = ["한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉", "열", "열한", "열두"]


@SETTINGS
@given(st.integers(1, 12), st.booleans(), st.sampled_from(["", "반", "30분", "15분"]),
       st.sampled_from(["오전", "오후", "저녁", "아침", "새벽", "밤"]))
def test_times_with_their_part_of_the_day(hour, native, minutes, mer):
    h = NATIVE[hour - 1] if native else str(hour)
    text = f"{mer} {h} 시 {minutes}".strip() + " 약속"
    got = dates.time_of_day(text)
    minute = 30 if minutes in ("반", "30분") else 15 if minutes else 0
    want = hour % 12 + (12 if mer in ("오후", "저녁", "밤") else 0)
    if mer in ("밤", "저녁") and hour == 12:
        assert got == time(23, 59), text  # 밤 12시: 자정
    elif mer in ("밤", "저녁") and hour < 6:
        assert got is not None, text
    else:
        assert got == time(want, minute), text


@SETTINGS
@given(st.integers(1, 12), st.booleans(), st.sampled_from(["", " 반", " 30분"]), st.sampled_from(["동안", "", "짜리",
       " 걸려요"]))
def test_a_duration_is_no_time_of_day(hours, native, extra, tail):
    h = NATIVE[hours - 1] if native else str(hours)
    text = f"회의는 {h} 시간{extra} {tail}".strip()
    found = dates.durations(text)
    assert [d.minutes for d in found] == [hours * 60 + (30 if extra else 0)], text
    assert dates.time_of_day(text) is None, text


@SETTINGS
@given(st.integers(1, 99), st.integers(1, 9), st.sampled_from(["시간", "배", "만원", "%", "점"]))
def test_a_decimal_is_no_date(a, b, unit):
    assert dates.scan(f"{a}.{b}{unit} 걸려요", REF) == []


@SETTINGS
@given(st.text(alphabet="0123456789.,-/~월일년시분만원억천 가나다오후전", max_size=400))
def test_readers_never_raise_and_stay_in_the_text(text):
    for span in dates.scan(text, REF):
        assert 0 <= span.start.start <= span.start.end <= len(text)
    for a in amounts(text):
        assert 0 <= a.start <= a.end <= len(text)
    for n in numbers(text):
        assert 0 <= n.start < n.end <= len(text)


# Issue 77: the forms an outside review found misread. Each generator writes the form as people do.
NIGHT_DAYS = {"오늘": 0, "내일": 1, "모레": 2}


@SETTINGS
@given(st.integers(1, 11), st.booleans(), st.sampled_from(["", " 반", " 30분"]), st.sampled_from(sorted(NIGHT_DAYS)),
       st.sampled_from(["에 알림", "까지", " 약속", "에 깨워 줘"]))
def test_the_nights_hours_after_midnight_are_the_next_days(hour, native, minutes, day_word, tail):
    h = NATIVE[hour - 1] if native else str(hour)
    text = f"{day_word} 밤 {h}시{minutes}{tail}"
    spans = dates.scan(text, REF)
    minute = 30 if minutes else 0
    day = REF + timedelta(days=NIGHT_DAYS[day_word])
    if hour <= dates.AFTER_MIDNIGHT:  # 밤 1시-5시: after midnight, so the next day's
        assert (spans[0].start.day, spans[0].start.at) == (day + timedelta(days=1), time(hour, minute)), text
        assert spans[0].start.night
    else:  # 밤 6시-11시: the evening's
        assert (spans[0].start.day, spans[0].start.at) == (day, time(hour + 12, minute)), text


# First syllables of words that begin with 시 and are no hour (시작, 시험, 한시적, 시장, 시청 …); none starts a
# particle or a word an hour takes (반, 쯤, 정각 …).
NOT_HOUR_SYLLABLES = "작험적장청절계민즌리스키합상점설사회련력중골트"


@SETTINGS
@given(st.sampled_from(NATIVE), st.sampled_from(["", " "]),
       st.text(alphabet=NOT_HOUR_SYLLABLES, min_size=1, max_size=3),
       st.sampled_from(["", "할게요", "을 봤어요", "으로"]))
def test_a_number_before_a_word_beginning_with_si_is_no_time(native, space, rest, tail):
    text = f"네 {native}{space}시{rest}{tail}"
    assert dates.time_of_day(text) is None, text
    assert all(s.start.at is None for s in dates.scan(f"내일 {native}{space}시{rest}{tail}", REF)), text


@SETTINGS
@given(st.sampled_from(NATIVE[:11]),
       st.sampled_from(["에", "까지", "쯤", " 반", "부터", "에는", "이에요", "", " 정각"]))
def test_an_hour_whose_si_ends_the_word_is_a_time(native, tail):
    assert dates.time_of_day(f"{native} 시{tail} 만나요") is not None, native + tail


@SETTINGS
@given(st.integers(0, 6), st.integers(-30, 30), st.sampled_from(["지난", "저번", "지난번"]),
       st.sampled_from(["에", "에 만났어", "", "까지 냈어요"]))
def test_a_past_weekday_is_the_last_one_before_today(weekday, shift, word, tail):
    ref = REF + timedelta(days=shift)
    text = f"{word} {'월화수목금토일'[weekday]}요일{tail}"
    got = dates.scan(text, ref)[0].start.day
    assert got.weekday() == weekday and ref - timedelta(days=7) <= got < ref, (text, ref, got)


@SETTINGS
@given(st.sampled_from(["학점", "평점", "평균", "별점", "시력", "", "GPA"]), st.integers(1, 12), st.integers(0, 9),
       st.sampled_from([" 이상", " 이하", "이상", "점", " 점", "배", "%", " 미만", "", " 정도", "이에요"]))
def test_a_decimal_with_or_without_its_unit_is_no_date(label, a, b, unit):
    text = f"{label} {a}.{b}{unit}".strip()
    assert dates.scan(text, REF) == [], text


@SETTINGS
@given(st.sampled_from(["그", "이", "제", "무슨", "좋은", "거짓", "마지막", "한"]),
       st.sampled_from(["", "이", "은", "도", "을", "이에요", " 맞아요", "까지"]))
def test_mal_as_a_word_is_no_months_end(word, tail):
    text = f"{word} 말{tail}"
    assert dates.scan(text, REF) == [], text


@SETTINGS
@given(st.sampled_from(["이번 달 ", "이달 ", "다음 달 ", "3월 ", "월"]), st.sampled_from(["말", "초"]),
       st.sampled_from(["", "까지", "에", " 마감"]))
def test_a_months_end_after_its_month_still_reads(month, edge, tail):
    if month == "월" and edge == "초":
        return  # 월초 is not written as one word here
    assert dates.scan(f"{month}{edge}{tail}", REF), month + edge + tail


@SETTINGS
@given(st.integers(11, 9_999).filter(lambda n: n % 10), st.sampled_from(["프로", "퍼센트", "%", "명", "개", "번", "월",
                                                                         "일", "세", "살", "년", " 원", " 명", "층"]),
       st.sampled_from(["", "할인율은 ", "모두 ", "("]), st.sampled_from(["", "이야", " 정도", "로 해 줘", ")"]))
def test_a_sino_korean_number_with_its_ones_digit_reads_back(n, counter, lead, tail):
    """Issue 79: "할인율은 십오프로" was read as 10. The ones digit after 십/백/천 counts where a counter follows."""
    from services.runtime.korean.numbers import numbers

    text = f"{lead}{_sino_group(n, drop_one=True)}{counter}{tail}"
    assert [x.value for x in numbers(text)] == [n], text


@SETTINGS
@given(st.sampled_from(["천", "백", "십", "삼천", "오백"]),
       st.sampled_from(["이 넘어요", "이라도", "이나 돼", "사 같은"]))
def test_a_particle_after_a_sino_korean_unit_is_no_digit(number, tail):
    from services.runtime.korean.numbers import numbers

    text = f"팔로워가 {number}{tail}"
    assert [x.value for x in numbers(text)] == [numbers(number)[0].value], text
