"""Résumé-like and business Korean pages with known personal data and look-alike distractors (bench.pii_text's set).

Each page is rendered in one of four layouts — a form (``성명: …`` lines), prose, a header block
(``이름 | 전화 | 메일``) and a table (``| 항목 | 내용 |``) — from random values of every kind:
resident numbers (with a valid checksum, or the post-2020 random tail), alien numbers, mobile and
landline numbers (separators, spaces, +82), e-mail, URLs and handles, card numbers (Luhn-valid),
bank accounts with their bank, passports (both forms), driver's licences, dates of birth,
street and lot addresses, person names. Distractors on every page must not be found: business
registration numbers, a company's representative and fax lines, postal codes, employment
periods, salaries, test scores, versions, product and order codes, ordinary dates. A share of the
numbers carry OCR confusions (O for 0, l or I for 1, dash variants, a space inside).

``pages(seed, n)``: ``n`` pages, each ``(text, [(kind, start, end), ...])``. Seeds are the split:
the bench tunes on one seed and reports on another.
"""

from __future__ import annotations

import random
from collections.abc import Callable

SURNAMES = "김이박최정강조윤장임한오서신권황안송류홍고문양손배백허유남심노하곽성차주우구"
GIVEN = "민서지현준우예은도윤하연수아시훈성진영호재희경태혜나라윤석찬동규미선정유빈"
PROVINCES = [("서울특별시", ["강남구", "마포구", "송파구", "관악구", "노원구"]),
             ("부산광역시", ["해운대구", "수영구", "사하구"]),
             ("경기도", ["성남시 분당구", "수원시 영통구", "고양시 일산동구", "용인시 수지구"]),
             ("인천광역시", ["연수구", "남동구"]), ("대전광역시", ["유성구", "서구"]), ("경상남도", ["창원시 의창구"]),
             ("전라북도", ["전주시 완산구"]), ("제주특별자치도", ["제주시"])]
ROADS = ["테헤란로", "월드컵북로", "올림픽로", "해운대로", "판교역로", "광교중앙로", "중앙대로", "대학로", "한밭대로",
         "번영로"]
BANKS = ["국민은행", "신한은행", "우리은행", "하나은행", "농협", "카카오뱅크", "기업은행", "토스뱅크"]
COMPANIES = ["네이버", "카카오", "쿠팡", "토스", "당근", "라인플러스", "우아한형제들", "삼성SDS"]


def _name(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice((2, 2, 2, 1))))


def _rrn(rng: random.Random, alien: bool = False) -> str:
    year = rng.randint(1965, 2004)
    mm, dd = rng.randint(1, 12), rng.randint(1, 28)
    gender = (rng.choice("56") if year < 2000 else rng.choice("78")) if alien else \
        (rng.choice("12") if year < 2000 else rng.choice("34"))
    body = f"{year % 100:02d}{mm:02d}{dd:02d}{gender}" + "".join(str(rng.randint(0, 9)) for _ in range(5))
    if rng.random() < 0.7:  # a checksum (the pre-2020 form)
        total = sum(int(d) * w for d, w in zip(body, (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5), strict=True))
        body += str((11 - total % 11) % 10)
    else:  # issued since 2020-10: a random last digit
        body += str(rng.randint(0, 9))
    return f"{body[:6]}-{body[6:]}"


def _mobile(rng: random.Random) -> str:
    a, b = rng.randint(1000, 9999), rng.randint(1000, 9999)
    return rng.choice([f"010-{a}-{b}", f"010 {a} {b}", f"010.{a}.{b}", f"+82 10-{a}-{b}", f"010{a}{b}",
                       f"+82-10-{a}-{b}"])


def _landline(rng: random.Random) -> str:
    area = rng.choice(["02", "031", "032", "051", "042", "062", "064", "070"])
    return f"{area}-{rng.randint(200, 999) if area == '02' else rng.randint(200, 9999)}-{rng.randint(1000, 9999)}"


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(str(rng.randint(0, 9)) for _ in range(length - len(prefix) - 1))
    for check in range(10):
        digits = body + str(check)
        total = 0
        for i, d in enumerate(reversed(digits)):
            n = int(d)
            if i % 2:
                n = n * 2 - 9 if n > 4 else n * 2
            total += n
        if total % 10 == 0:
            return digits
    raise AssertionError


def _card(rng: random.Random) -> str:
    digits = _luhn_complete(rng.choice(["4", "51", "53", "9410", "3562", "6250"]), 16, rng)
    return "-".join(digits[i:i + 4] for i in range(0, 16, 4)) if rng.random() < 0.8 else \
        " ".join(digits[i:i + 4] for i in range(0, 16, 4))


def _account(rng: random.Random) -> str:
    def d(n: int) -> str:
        return "".join(str(rng.randint(0, 9)) for _ in range(n))

    return rng.choice([f"{d(6)}-{d(2)}-{d(6)}", f"{d(3)}-{d(6)}-{d(5)}", f"{d(4)}-{d(2)}-{d(7)}",
                       f"{d(3)}-{d(3)}-{d(6)}", f"3333-{d(2)}-{d(7)}", f"{d(12)}"])


def _passport(rng: random.Random) -> str:
    return rng.choice([f"M{rng.randint(10_000_000, 99_999_999)}",
                       f"M{rng.randint(100, 999)}{rng.choice('ABCDEFGHJK')}{rng.randint(1000, 9999)}"])


def _license(rng: random.Random) -> str:
    return f"{rng.randint(11, 28)}-{rng.randint(10, 99)}-{rng.randint(100000, 999999)}-{rng.randint(10, 99)}"


def _birth(rng: random.Random) -> str:
    y, m, d = rng.randint(1965, 2004), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice([f"{y}.{m:02d}.{d:02d}", f"{y}-{m:02d}-{d:02d}", f"{y}년 {m}월 {d}일"])


def _address(rng: random.Random) -> str:
    prov, districts = rng.choice(PROVINCES)
    district = rng.choice(districts)
    if rng.random() < 0.75:
        unit = rng.choice(["", f", {rng.randint(1, 30)}층", f" {rng.randint(101, 120)}동 {rng.randint(101, 2504)}호",
                           f", {rng.randint(101, 1504)}호"])
        return f"{prov} {district} {rng.choice(ROADS)} {rng.randint(1, 400)}{unit}"
    dong = rng.choice(["역삼동", "서교동", "잠실동", "우동", "정자동", "봉명동"])
    return f"{prov} {district} {dong} {rng.randint(1, 999)}-{rng.randint(1, 40)}"


def _email(rng: random.Random, name: str) -> str:
    user = rng.choice(["hong", "minsu.kim", "jy_park", "dev.lee", "seo2020", "k.jiwoo"]) + str(rng.randint(1, 99))
    return f"{user}@{rng.choice(['gmail.com', 'naver.com', 'kakao.com', 'daum.net', 'example.co.kr'])}"


def _url(rng: random.Random) -> str:
    who = rng.choice(["devkim", "jypark", "minsoo-dev", "leeseo"])
    return rng.choice([f"https://github.com/{who}", f"https://{who}.tistory.com", f"https://velog.io/@{who}",
                       f"https://blog.naver.com/{who}"])


OCR = str.maketrans({"0": "O", "1": "l"})


def _ocr(value: str, rng: random.Random) -> str:
    """One OCR confusion in a number: a digit read as a letter, a dash variant, or a space inside."""
    kind = rng.choice(["letter", "dash", "space"])
    if kind == "letter":
        spots = [i for i, c in enumerate(value) if c in "01" and 0 < i < len(value) - 1]
        if spots:
            i = rng.choice(spots)
            return value[:i] + value[i].translate(OCR) + value[i + 1:]
    if kind == "dash" and "-" in value:
        return value.replace("-", rng.choice(["–", "—", "－"]), 1)
    i = value.find("-")
    return value[:i] + " " + value[i:] if i > 0 else value


DISTRACTORS: list[Callable[[random.Random], str]] = [
    lambda r: f"사업자등록번호 {r.randint(100, 999)}-{r.randint(10, 99)}-{r.randint(10000, 99999)}",
    lambda r: f"회사 대표번호 1588-{r.randint(1000, 9999)}",
    lambda r: f"대표전화 02-{r.randint(200, 999)}-{r.randint(1000, 9999)}",
    lambda r: f"팩스 031-{r.randint(200, 999)}-{r.randint(1000, 9999)}",
    lambda r: f"우편번호 {r.randint(10000, 63999)}",
    lambda r: f"재직 기간 {r.randint(2010, 2020)}.{r.randint(1, 12):02d} ~ "
              f"{r.randint(2021, 2025)}.{r.randint(1, 12):02d}",
    lambda r: f"희망 연봉 {r.randint(30, 90) * 100:,}만 원",
    lambda r: f"TOEIC {r.randint(600, 990)}점, OPIc IH",
    lambda r: f"Python 3.{r.randint(8, 13)}, Spring Boot {r.randint(2, 3)}.{r.randint(0, 5)}.{r.randint(0, 9)}",
    lambda r: f"주문번호 {r.randint(2024, 2026)}{r.randint(10, 12)}{r.randint(10, 28)}-{r.randint(1000000, 9999999)}",
    lambda r: f"제품 코드 SKU-{r.randint(2020, 2026)}-{r.randint(10000, 99999)}",
    lambda r: f"작성일 {r.randint(2024, 2026)}.{r.randint(1, 12):02d}.{r.randint(1, 28):02d}",
    lambda r: f"프로젝트 기간: {r.randint(2019, 2024)}년 {r.randint(1, 12)}월 ~ "
              f"{r.randint(2024, 2026)}년 {r.randint(1, 12)}월",
    lambda r: f"{r.choice(COMPANIES)} 고객님 안녕하세요. 선생님께 감사드립니다.",
    lambda r: f"운송장 {r.randint(100000000000, 999999999999)}",
]


def page(rng: random.Random) -> tuple[str, list[tuple[str, int, int]]]:
    """One page: its text and gold spans."""
    name = _name(rng)
    fields: list[tuple[str, str, str]] = [  # (label, kind, value)
        ("성명", "person", name),
        ("생년월일", "birth_date", _birth(rng)),
        ("주민등록번호", "resident_number", _rrn(rng)),
        ("휴대폰", "phone", _mobile(rng)),
        ("이메일", "email", _email(rng, name)),
        ("주소", "address", _address(rng)),
    ]
    optional = [("자택 전화", "phone", _landline(rng)), ("블로그", "url", _url(rng)),
                ("인스타그램", "handle", "@" + rng.choice(["min_su", "jy.park", "dev_lee", "seo.ah"])),
                ("급여 계좌", "bank_account", f"{rng.choice(BANKS)} {_account(rng)}"),
                ("여권번호", "passport", _passport(rng)), ("운전면허번호", "driver_license", _license(rng)),
                ("결제 카드", "card", _card(rng)), ("외국인등록번호", "alien_number", _rrn(rng, alien=True)),
                ("보호자", "person", _name(rng))]
    fields += rng.sample(optional, rng.randint(4, len(optional)))
    rng.shuffle(fields)
    ocr_kinds = {"phone", "resident_number", "card", "bank_account", "driver_license", "alien_number"}
    fields = [(label, kind, _ocr(value, rng) if kind in ocr_kinds and rng.random() < 0.2 else value)
              for label, kind, value in fields]
    layout = rng.choice(["form", "prose", "header", "table"])
    parts: list[tuple[str, str | None]] = []  # (text, kind of personal data or None)

    def add(text: str, kind: str | None = None) -> None:
        parts.append((text, kind))

    def value_of(kind: str, value: str) -> None:
        if kind == "bank_account":  # the bank's name is context, the number is the data
            bank, _, number = value.partition(" ")
            add(bank + " ")
            add(number, kind)
        else:
            add(value, kind)

    add(rng.choice(["이 력 서\n\n", "입사지원서\n", "[지원서] 백엔드 개발자\n\n", "인사기록카드\n"]))
    if layout == "form":
        for label, kind, value in fields:
            add(f"{label}: ")
            value_of(kind, value)
            add("\n")
    elif layout == "table":
        add("| 항목 | 내용 |\n|---|---|\n")
        for label, kind, value in fields:
            add(f"| {label} | ")
            value_of(kind, value)
            add(" |\n")
    elif layout == "header":
        head = [f for f in fields if f[1] in ("person", "phone", "email")]
        rest = [f for f in fields if f not in head]
        for i, (label, kind, value) in enumerate(head):
            add(" | " if i else "")
            add(f"{label} " if kind != "person" else "지원자 ")
            value_of(kind, value)
        add("\n\n")
        for label, kind, value in rest:
            add(f"- {label} ")
            value_of(kind, value)
            add("\n")
    else:  # prose
        for label, kind, value in fields:
            lead = {"person": "안녕하세요, 지원자 ", "birth_date": "생년월일은 ", "address": "현재 주소는 ",
                    "phone": f"{label} 번호는 "}.get(kind, f"{label}은(는) ")
            add(lead)
            value_of(kind, value)
            add({"person": "입니다. ", "birth_date": "이며, ", "address": "에 살고 있습니다. "}.get(kind, "입니다. "))
        add("\n")
    add("\n[경력]\n")
    for _ in range(rng.randint(4, 7)):
        add(rng.choice(DISTRACTORS)(rng) + "\n")
    add(f"{rng.choice(COMPANIES)}에서 결제 시스템을 개발했고, 주문 처리량을 {rng.randint(2, 9)}배 늘렸습니다. "
        "팀원들과 코드 리뷰 문화를 만들었습니다.\n")
    text, pos = "", 0
    gold: list[tuple[str, int, int]] = []
    for piece, what in parts:
        if what is not None:
            gold.append((what, pos, pos + len(piece)))
        text += piece
        pos += len(piece)
    return text, gold


def pages(seed: int, n: int) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``n`` pages from ``seed`` (one seed per split)."""
    rng = random.Random(seed)
    return [page(rng) for _ in range(n)]
