"""One recognizer per kind of personal data in Korean text: each returns spans with a score and the rule that fired.

Numbers are read on a *digit view* of the text, the same length as the text (offsets stay the
original's): OCR's letter-for-digit confusions (O o → 0, l I | → 1, S → 5, B → 8) next to digits,
and every hyphen or dash variant as ``-``; spaces inside a number are allowed by the patterns.

Scores, stated (not fitted): a number whose structure checks out (a resident number's birth date
and checksum, a card's Luhn digit) scores 0.9–0.95; one whose structure cannot be checked but whose
context names it (계좌, 여권, 면허) 0.8–0.9; a plausible form without either 0.3–0.45, under the
detector's default threshold (0.5). A resident number whose checksum fails still scores 0.75 when
its birth date is valid: numbers issued since October 2020 end in random digits, with no checksum.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

from services.ocr.pii.gazetteer import BANKS, COMPOUND_SURNAMES, DISTRICTS, PROVINCES, SURNAMES

KINDS = ("resident_number", "alien_number", "phone", "email", "url", "handle", "card", "bank_account",
         "passport", "driver_license", "birth_date", "address", "person")


@dataclass(frozen=True)
class Span:
    """One finding: ``text[start:end]`` is personal data of ``kind``; ``rule`` says what fired."""

    kind: str
    start: int
    end: int
    score: float
    rule: str


_DASHES = "‐‑‒–—―－−﹣"
_LOOKALIKE = {"O": "0", "o": "0", "l": "1", "I": "1", "|": "1", "S": "5", "B": "8"}


def digit_view(text: str) -> str:
    """``text`` with OCR look-alikes next to digits read as digits and dashes as ``-`` (same length)."""
    chars = list(text)
    for i, ch in enumerate(chars):
        if ch in _DASHES:
            chars[i] = "-"
    for i, ch in enumerate(chars):
        if ch in _LOOKALIKE:
            before = chars[i - 1] if i > 0 else ""
            after = chars[i + 1] if i + 1 < len(chars) else ""
            if before.isdigit() or after.isdigit():
                chars[i] = _LOOKALIKE[ch]
    return "".join(chars)


def _context(text: str, start: int, end: int, words: tuple[str, ...], before: int = 20, after: int = 8) -> bool:
    window = text[max(0, start - before):start] + " " + text[end:end + after]
    return any(w in window for w in words)


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


_B = r"(?<![0-9A-Za-z])"  # not inside a longer token
_E = r"(?![0-9A-Za-z])"
_S = r"\s?[.\-]?\s?"  # a separator inside a number: a dash or a dot, a space either side (OCR splits them)

# -- resident and alien registration numbers ------------------------------------------------
_RRN = re.compile(_B + r"(\d{2})(\d{2})(\d{2})\s?-?\s?([0-9])(\d{6})" + _E)
RRN_WORDS = ("주민등록번호", "주민번호", "주민등록", "외국인등록번호", "외국인등록", "등록번호")
_WEIGHTS = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)


def _rrn_date(yy: str, mm: str, dd: str, gender: str) -> bool:
    century = {"1": 1900, "2": 1900, "5": 1900, "6": 1900, "3": 2000, "4": 2000, "7": 2000, "8": 2000,
               "9": 1800, "0": 1800}[gender]
    try:
        date(century + int(yy), int(mm), int(dd))
    except ValueError:
        return False
    return True


def rrn_checksum(digits: str) -> bool:
    """The check digit of a 13-digit resident (or alien, pre-2020) number."""
    total = sum(int(d) * w for d, w in zip(digits[:12], _WEIGHTS, strict=True))
    return (11 - total % 11) % 10 == int(digits[12])


def resident_numbers(text: str, view: str) -> Iterator[Span]:
    """주민등록번호 and 외국인등록번호 (the 7th digit 5-8 is a foreigner's)."""
    for m in _RRN.finditer(view):
        yy, mm, dd, gender, rest = m.groups()
        digits = yy + mm + dd + gender + rest
        kind = "alien_number" if gender in "5678" else "resident_number"
        context = _context(text, m.start(), m.end(), RRN_WORDS)
        if not _rrn_date(yy, mm, dd, gender):
            if context:
                yield Span(kind, m.start(), m.end(), 0.6, "rrn:context,bad-date")
            continue
        if rrn_checksum(digits):
            yield Span(kind, m.start(), m.end(), 0.95, "rrn:date+checksum")
        else:  # issued since 2020-10: the last six digits carry no checksum
            yield Span(kind, m.start(), m.end(), 0.85 if context else 0.75, "rrn:date,no-checksum")


# -- phone numbers ----------------------------------------------------------------------------
_PHONE = re.compile(r"(?:\+\s?82[\s-]?\(?0?\)?[\s-]?(?=[1-7])|" + _B + r")(0?1[016789]|0?2|0?[3-6][1-5]|0?70|050\d?)"
                    r"\)?" + _S + r"(\d{3,4})" + _S + r"(\d{4})" + _E)
_REP = re.compile(_B + r"(1[568]\d{2})[\s.-]?(\d{4})" + _E)
COMPANY_WORDS = ("대표", "대표번호", "회사", "사무실", "팩스", "FAX", "Fax", "fax", "고객센터", "콜센터", "본사",
                 "Tel.", "TEL", "사업장", "문의")


def phones(text: str, view: str, company_lines: bool = False) -> Iterator[Span]:
    """Mobile and landline numbers (area codes, +82, separators); company lines only with ``company_lines``."""
    for m in _PHONE.finditer(view):
        prefix = m.group(1)
        if not prefix.startswith("0") and not m.group().startswith("+"):
            continue  # without +82 an area code starts with 0
        mobile = prefix.lstrip("0").startswith("1")
        if not mobile and not company_lines and _context(text, m.start(), m.end(), COMPANY_WORDS, before=12, after=0):
            continue  # a company's line, marked as such: not personal data under the default policy
        yield Span("phone", m.start(), m.end(), 0.95 if mobile else 0.85,
                   "phone:mobile" if mobile else "phone:landline")
    if company_lines:
        for m in _REP.finditer(view):
            yield Span("phone", m.start(), m.end(), 0.6, "phone:representative")


# -- e-mail, URLs, handles --------------------------------------------------------------------
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
                    r"(?![A-Za-z0-9_-])")
_URL = re.compile(r"(?<![\w@])(?:https?://|www\.)[^\s<>()\"'가-힣]+[^\s<>()\"'.,가-힣]|(?<![\w@./])"
                  r"(?:github\.com|gitlab\.com|linkedin\.com|instagram\.com|velog\.io|blog\.naver\.com|"
                  r"brunch\.co\.kr|notion\.site|tistory\.com)/[^\s<>()\"'가-힣]*[^\s<>()\"'.,가-힣]")
_HANDLE = re.compile(r"(?<![A-Za-z0-9_@./])@([A-Za-z0-9_](?:[A-Za-z0-9_.]{1,28}[A-Za-z0-9_])?)(?![A-Za-z0-9_@])")


def emails(text: str, view: str) -> Iterator[Span]:
    """E-mail addresses."""
    for m in _EMAIL.finditer(text):
        yield Span("email", m.start(), m.end(), 0.95, "email")


def urls(text: str, view: str) -> Iterator[Span]:
    """Personal URLs (a profile, a blog, a portfolio) and social handles (@name)."""
    for m in _URL.finditer(text):
        yield Span("url", m.start(), m.end(), 0.8, "url")
    for m in _HANDLE.finditer(text):
        yield Span("handle", m.start(), m.end(), 0.75, "handle")


# -- cards and bank accounts --------------------------------------------------------------------
_CARD = re.compile(_B + r"(\d{4})" + _S + r"(\d{4})" + _S + r"(\d{4})" + _S + r"(\d{4})" + _E + r"|" + _B
                   + r"(3[47]\d{2})" + _S + r"(\d{6})" + _S + r"(\d{5})" + _E)
CARD_WORDS = ("카드", "card", "Card", "결제", "신용", "체크")


def luhn(digits: str) -> bool:
    """The Luhn check of a card number."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def cards(text: str, view: str) -> Iterator[Span]:
    """Card numbers: 16 digits (Amex 15), the Luhn digit, a known issuer prefix."""
    for m in _CARD.finditer(view):
        digits = _digits(m.group())
        issuer = digits[0] in "3456" or digits.startswith(("9", "2"))
        if luhn(digits) and issuer:
            yield Span("card", m.start(), m.end(), 0.9, "card:luhn")
        elif _context(text, m.start(), m.end(), CARD_WORDS):
            yield Span("card", m.start(), m.end(), 0.6, "card:context")


_ACCOUNT = re.compile(_B + r"\d{2,6}(?:\s?[\s-]\s?\d{2,7}){1,3}" + _E + r"|" + _B + r"\d{10,14}" + _E)
ACCOUNT_WORDS = ("계좌", "계좌번호", "입금", "예금주", "급여 통장", "통장", *BANKS)
NOT_ACCOUNT_WORDS = ("사업자", "사업자등록", "법인", "등록번호", "우편", "주문", "송장", "운송장", "제품", "모델",
                     "SKU")


def bank_accounts(text: str, view: str) -> Iterator[Span]:
    """Bank account numbers: 10-14 digits in groups, with a bank's name or 계좌 next to them."""
    for m in _ACCOUNT.finditer(view):
        digits = _digits(m.group())
        if not 10 <= len(digits) <= 14:
            continue
        if _context(text, m.start(), m.end(), NOT_ACCOUNT_WORDS, before=14, after=0):
            continue
        if _PHONE.fullmatch(m.group()) or _PHONE.fullmatch(view[max(0, m.start() - 4):m.end()].lstrip()):
            continue  # shaped like a phone number (an area code, its groups): the phone recognizer's
        if _context(text, m.start(), m.end(), ACCOUNT_WORDS, before=24, after=10):
            yield Span("bank_account", m.start(), m.end(), 0.85, "account:context")


# -- passports and driver's licences -------------------------------------------------------------
_PASSPORT = re.compile(_B + r"([MSRODG][0-9]{8}|M[0-9]{3}[A-Z][0-9]{4})" + _E)
PASSPORT_WORDS = ("여권", "passport", "Passport", "PASSPORT", "여권번호")
# After 여권, a 9-character number whose letter OCR misread (M as 1, 4, N or <; the letter of the 2021
# form as a digit): what a passport number looks like when read off an image.
_PASSPORT_READ = re.compile(_B + r"([A-Z0-9<][0-9]{3}[A-Z0-9<][0-9]{4})" + _E)
_LICENSE = re.compile(r"(?:(?<=[가-힣])|" + _B + r")\s?(\d{2})(" + _S + r")(\d{2})" + _S + r"(\d{6})" + _S
                      + r"(\d{2})" + _E)
LICENSE_WORDS = ("면허", "운전면허", "면허번호", "driver", "Driver")


def passports(text: str, view: str) -> Iterator[Span]:
    """Korean passport numbers (M12345678, the 2021 form M123A4567): the form, and 여권 nearby."""
    upper = view.upper()
    seen = set()
    for m in _PASSPORT.finditer(upper):
        context = _context(text, m.start(), m.end(), PASSPORT_WORDS, before=24)
        seen.add(m.start())
        yield Span("passport", m.start(), m.end(), 0.9 if context else 0.4, "passport:" + ("context" if context
                                                                                             else "form"))
    for m in _PASSPORT_READ.finditer(upper):
        if m.start() not in seen and _context(text, m.start(), m.end(), PASSPORT_WORDS, before=12):
            yield Span("passport", m.start(), m.end(), 0.7, "passport:context+misread")


def licenses(text: str, view: str) -> Iterator[Span]:
    """Driver's licence numbers (region 11-28, two digits, six, two), 면허 nearby raising the score."""
    for m in _LICENSE.finditer(view):
        region = int(m.group(1))
        context = _context(text, m.start(), m.end(), LICENSE_WORDS, before=24)
        separated = bool(m.group(2).strip())
        if (11 <= region <= 28 and separated) or context:
            start = m.start() + (1 if view[m.start()] == " " else 0)
            yield Span("driver_license", start, m.end(), 0.9 if context else 0.7, "license")


# -- dates of birth --------------------------------------------------------------------------------
_DATE = re.compile(_B + r"((?:19|20)\d{2}|\d{2})\s*(?:[./-]|년)\s*(\d{1,2})\s*(?:[./-]|월)\s*(\d{1,2})(?:\s*일)?" + _E)
BIRTH_WORDS = ("생년월일", "출생", "생일", "태어", "Date of Birth", "DOB", "D.O.B", "birth", "Birth", "생년")


def birth_dates(text: str, view: str) -> Iterator[Span]:
    """Dates of birth: a date with 생년월일, 출생, DOB ... just before it (not every date)."""
    for m in _DATE.finditer(view):
        if not _context(text, m.start(), m.end(), BIRTH_WORDS, before=16, after=0):
            continue
        try:
            year = int(m.group(1))
            date(year if year > 99 else 1900 + year, int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
        yield Span("birth_date", m.start(), m.end(), 0.9, "birth:context")


# -- addresses ----------------------------------------------------------------------------------------
_PROV = "|".join(sorted(PROVINCES, key=len, reverse=True))
_DIST = "|".join(sorted(DISTRICTS, key=len, reverse=True))
_UNIT = r"(?:\s*+,?\s*+(?:\d+동\s*+)?\d+호|\s*+,?\s*+\d+층|\s*+\([^)]{1,20}\))*+"
# Each name is one run of Hangul and digits taken whole, up to its last syllable, whose ending is then checked:
# a run that could end at any 시, 동 or 로 inside it made the address pattern cubic on long Hangul text.
_ROAD = r"(?>[가-힣0-9]*[가-힣])(?<=[로길])(?:\s*+\d+(?:번)?길)?\s*+\d+(?:-\d+)?" + _UNIT
_LOT = r"(?>[가-힣0-9]*[가-힣])(?<=[동읍면리가])\s*+\d+(?:-\d+)?(?:번지)?" + _UNIT
_ADDR = re.compile(
    rf"(?:(?:{_PROV})(?![가-힣]{{2,}}(?:대학|병원|은행|공항|역))\s*+(?:(?>[가-힣]+)(?<=[시군구])\s*+){{0,2}}"
    rf"|(?:{_DIST})\s*+)(?:(?>[가-힣]+)(?<=[읍면동])\s*+)?(?:{_ROAD}|{_LOT})")
ADDRESS_WORDS = ("주소", "거주지", "자택", "집 주소", "현주소", "Address")


def addresses(text: str, view: str) -> Iterator[Span]:
    """Street (로/길 + number) and lot (동/읍/면/리 + number) addresses after a province or a district."""
    for m in _ADDR.finditer(text):
        score = 0.9 if _context(text, m.start(), m.end(), ADDRESS_WORDS, before=12) else 0.8
        yield Span("address", m.start(), m.end(), score, "address:gazetteer")


# -- person names ---------------------------------------------------------------------------------------
NAME_LABELS = ("성명", "이름", "성 명", "지원자", "작성자", "담당자", "추천인", "보호자", "예금주", "Name", "NAME",
               "신청인", "대표자", "본인")
_LABELLED = re.compile(r"(?:" + "|".join(re.escape(w) for w in NAME_LABELS) + r")(?:은\(는\)|은|는|이|가)?"
                       r"\s*+[:：|]?\s*+\(?\s*+([가-힣]{2,4})"
                       r"(?=[\s,.)·/|(]|님|씨|$|입니다|이며|이고|은|는|이|가|의|\n)")
_HONORIFIC = re.compile(r"(?<![가-힣])([가-힣]{2,4})\s?(?:님|씨)(?![가-힣]{2})")
_SIGNED = re.compile(r"(?<![가-힣])([가-힣]{2,4})\s?(?:드림|올림|\(인\)|\(서명\))")
NOT_NAMES = {"고객", "회원", "선생", "여러분", "사장", "부장", "과장", "대리", "팀장", "이사", "교수", "원장", "기사",
             "아버", "어머", "부모", "할머", "할아버", "형", "누나", "언니", "오빠", "동생", "친구", "담당", "관리",
             "사용", "구매", "작성", "지원", "신청", "보호", "본인", "대표", "상담", "직원", "학생", "환자", "손"}


def _surnamed(name: str) -> bool:
    return name[:2] in COMPOUND_SURNAMES or name[0] in SURNAMES


def _plausible(name: str) -> bool:
    return 2 <= len(name) <= 4 and _surnamed(name) and not any(name.startswith(w) for w in NOT_NAMES)


# Names a person writes without a label, found by position and shape (scored below a labelled name): a
# line that is only a name, where a résumé puts one — its first line, after the document's title, above a
# role line, after the date of a signature block — or a name on the title line itself (이력서 — 김민서).
_NAME_LINE = re.compile(r"(?P<name>[가-힣]{2,4})(?:\s*\((?:[\u4e00-\u9fff]{2,4}|인|서명)\)"
                        r"|\s*/\s*[A-Za-z][A-Za-z .'-]{1,40}"
                        r"|\s+(?:드림|올림))?")
_TITLE = r"(?:이\s*력\s*서|자기\s*소개서|경력\s*기술서|입사\s*지원서|지원서|resume|cv)"
_TITLE_LINE = re.compile(rf"\[?{_TITLE}\]?", re.IGNORECASE)
_TITLE_NAME = re.compile(rf"\[?{_TITLE}\]?\s*+[—–\-|:·]?\s*+(?P<name>[가-힣]{{2,4}})", re.IGNORECASE)
_ROLE_LINE = re.compile(r"개발자|엔지니어|디자이너|기획자|매니저|분석가|연구원|마케터|컨설턴트|담당자|년차|지원|"
                        r"신입|경력|"
                        r"developer|engineer|designer|manager", re.IGNORECASE)
_DATE_LINE = re.compile(r"^\s*(?:\d{4}\s*년|\d{4}\s*[./-]\s*\d{1,2})")
# A line of one word that is a section heading or an organisation, not a name (경력사항, 지원동기, 신한은행).
_HEADING_ENDINGS = tuple("""
사항 과정 동기 능력 경력 기술 소개 포부 계획 목표 내용 활동 업무 역량 정보 관리 개발 분석 교육 자격 수상 학력 경험
이력 기타 요약 개요 현황 실적 성과 목록 안내 사원 지원 신청
은행 카드 병원 의원 학교 대학 회사 전자 그룹 마트 약국 센터 공사 공단 협회 재단 상사 물산 증권 보험 식당
카페 주식 상회""".split())


def _lines(text: str) -> list[tuple[int, str]]:
    """The non-empty lines of ``text`` with their offsets, spaces around them cut."""
    out = []
    at = 0
    for raw in text.split("\n"):
        stripped = raw.strip()
        if stripped:
            out.append((at + raw.index(stripped[0]), stripped))
        at += len(raw) + 1
    return out


def _name_shaped(name: str) -> bool:
    """A surname and one to three syllables that are not a title, a heading or a word for a person (손님)."""
    return (2 <= len(name) <= 4 and _surnamed(name) and not _TITLE_LINE.fullmatch(name)
            and not any(name.startswith(w) for w in NOT_NAMES if len(w) >= 2) and not name.endswith(_HEADING_ENDINGS))


# A contact line: fields split by |, ·, •, /, a tab or two spaces (or one space before a phone or an e-mail),
# the first of them a name: "김주원  |  010.5856.8366  |  kim.81@…", "이서연 · 010-1234-5678 · 서울".
_CONTACT_HEAD = re.compile(r"(?P<name>[가-힣]{2,4})(?:\s*\([^()\n]{1,40}\))?"
                           r"(?P<sep>\s*+[|·•/]\s*+|\t\s*+|\s{2,}|\s(?=\S))")


# The words a contact line labels its fields with, not names although some begin with a surname (연락처).
_FIELD_LABELS = frozenset("연락처 전화 전화번호 휴대폰 휴대전화 핸드폰 이메일 메일 주소 홈페이지 블로그 깃허브 "
                          "포트폴리오 "
                          "생년월일 성별 국적 거주지 연락 번호 문의".split())


def _contact_evidence(fields: str) -> bool:
    """Whether the rest of a line holds a phone number, an e-mail or a URL (what makes it a contact line)."""
    view = digit_view(fields)
    return any(True for _ in phones(fields, view)) or any(True for _ in emails(fields, view)) \
        or any(True for _ in urls(fields, view))


def contact_line_persons(lines: list[tuple[int, str]]) -> Iterator[Span]:
    """A name as the first field of a contact line (see ``_CONTACT_HEAD``), scored 0.65."""
    for at, line in lines:
        m = _CONTACT_HEAD.match(line)
        if not m or not _name_shaped(m["name"]) or m["name"] in PROVINCES or m["name"] in DISTRICTS \
                or m["name"] in _FIELD_LABELS \
                or m["name"].endswith(("님", "씨")) or not _contact_evidence(line[m.end():]):
            continue
        yield Span("person", at + m.start("name"), at + m.end("name"), 0.65, "person:contact_line")


def unlabelled_persons(text: str) -> Iterator[Span]:
    """Names without a label, by their place on the page (see ``_NAME_LINE``), scored 0.6-0.7."""
    lines = _lines(text)
    yield from contact_line_persons(lines)
    for i, (at, line) in enumerate(lines):
        m = _TITLE_NAME.fullmatch(line)
        if m and _name_shaped(m["name"]):
            yield Span("person", at + m.start("name"), at + m.end("name"), 0.65, "person:title")
            continue
        m = _NAME_LINE.fullmatch(line)
        if not m or not _name_shaped(m["name"]):
            continue
        before = lines[i - 1][1] if i else ""
        after = lines[i + 1][1] if i + 1 < len(lines) else ""
        if i == 0 or _TITLE_LINE.fullmatch(before):
            score, rule = 0.65, "person:header"
        elif _ROLE_LINE.search(after) and len(after) <= 40:
            score, rule = 0.6, "person:above_role"
        elif _DATE_LINE.match(before) and i >= len(lines) - 3:
            score, rule = 0.7, "person:signature_block"
        else:
            continue
        yield Span("person", at + m.start("name"), at + m.end("name"), score, rule)


def persons(text: str, view: str) -> Iterator[Span]:
    """Names: after a label (성명, 이름, 지원자 ...), before 님/씨 or a signature (드림, (인)), with a surname.

    And names without a label, by their place on the page (:func:`unlabelled_persons`).
    """
    for m in _LABELLED.finditer(text):
        name = m.group(1)
        if _surnamed(name) and name not in NOT_NAMES:
            yield Span("person", m.start(1), m.end(1), 0.9, "person:label")
    for pattern, rule, score in ((_HONORIFIC, "person:honorific", 0.7), (_SIGNED, "person:signature", 0.8)):
        for m in pattern.finditer(text):
            name = m.group(1)
            if _plausible(name):
                yield Span("person", m.start(1), m.end(1), score, rule)
    yield from unlabelled_persons(text)


RECOGNIZERS: dict[str, Callable[[str, str], Iterator[Span]]] = {
    "resident_number": resident_numbers, "phone": phones, "email": emails, "url": urls, "card": cards,
    "bank_account": bank_accounts, "passport": passports, "driver_license": licenses, "birth_date": birth_dates,
    "address": addresses, "person": persons,
}
