r"""Résumé and cover-letter pages whose applicant's name has no label (bench.korean_reading's name set).

Written for issue 57 before the detector learnt unlabelled names. A person puts their name where a
form has no field for it: alone on the first line (``김민서``, ``김민서 (金旻瑞)``, ``김민서 / Minseo Kim``), beside
the document's title (``이력서 — 김민서``, ``자기소개서 김민서``), in a signature block after the date
(``2026년 12월 7일`` then ``김민서 (서명)`` or just ``김민서``), or above a role line (``김민서`` then ``백엔드 개발자 ·
5년차``). Every page also holds look-alikes that are not names: section headings and words that start with a
surname's syllable (경력사항, 정보보안, 김장 봉사, 이사회), teams, companies, a job title alone on a line.

``pages(seed, n)``: ``n`` pages, each ``(text, [(\"person\", start, end), ...])``; seed 1 is the tune split,
seed 2 the report split (bench.korean_reading reports on 2 only).
"""

from __future__ import annotations

import random

SURNAMES = "김이박최정강조윤장임한오서신권황안송류홍고문양손배백허유남심노하곽성차주우구민진나지엄채원천방"
GIVEN = "민서지현준우예은도윤하연수아시훈성진영호재희경태혜나라석찬동규미선정유빈채원소율건승한결"
ROMAN = ["Minseo Kim", "Jiwoo Park", "Seoyeon Lee", "Dohyun Choi", "Hayoon Jung", "Junho Kang"]
ROLES = ["백엔드 개발자", "프론트엔드 개발자", "데이터 분석가", "서비스 기획자", "UX 디자이너", "마케팅 매니저",
         "인사 담당자", "머신러닝 엔지니어", "QA 엔지니어", "영업 관리"]
HEADINGS = ["경력사항", "학력사항", "자기소개", "성장과정", "지원동기", "보유기술", "수상경력", "자격증", "어학능력",
            "프로젝트", "입사 후 포부", "성격의 장단점", "기타사항", "교육이수"]
LOOKALIKES = ["정보보안 교육 이수", "김장 나눔 봉사활동", "이사회 보고자료 작성", "박람회 부스 운영", "최우수상 수상",
              "강점: 꼼꼼함", "한국어 능력 원어민", "오픈소스 기여", "신입사원 교육 담당", "권한관리 시스템 개발",
              "안전관리 책임", "송년회 기획", "홍보팀 협업", "고객 응대 매뉴얼", "문제해결 역량", "양방향 통신",
              "손익 분석", "배송 추적 서비스", "유지보수 업무", "남부지사 근무", "심사 기준 정리", "노하우 공유",
              "하반기 공채", "성과 평가", "차세대 시스템", "주니어 멘토링", "우수사원 표창", "구조 개선"]
COMPANIES = ["(주)한빛소프트", "네이버", "카카오", "토스", "쿠팡", "LG전자", "현대오토에버", "우아한형제들"]


def _name(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice((2, 2, 2, 1))))


def _body(rng: random.Random) -> list[str]:
    lines = []
    for heading in rng.sample(HEADINGS, 3):
        lines.append(heading if rng.random() < 0.5 else f"[{heading}]")
        where = f"{rng.choice(COMPANIES)} {rng.choice(ROLES)}"
        start = f"{rng.randint(2015, 2022)}.{rng.randint(1, 12):02d}"
        lines.append(f"- {where} ({start}"
                     f" ~ {rng.randint(2023, 2026)}.{rng.randint(1, 12):02d})")
        lines.append(f"- {rng.choice(LOOKALIKES)}")
        lines.append(f"- {rng.choice(LOOKALIKES)}, {rng.choice(LOOKALIKES)}")
    return lines


def page(rng: random.Random) -> tuple[str, list[tuple[str, int, int]]]:
    """One page: its text and the gold span of its unlabelled name."""
    name = _name(rng)
    where = rng.choice(["first_line", "title", "signature", "role"])
    parts: list[tuple[str, bool]] = []  # (text, is the name)

    def add(text: str, is_name: bool = False) -> None:
        parts.append((text, is_name))

    if where == "first_line":
        add(name, True)
        add(rng.choice(["", "", f" ({rng.choice(['金旻瑞', '朴智宇', '李瑞妍'])})", f" / {rng.choice(ROMAN)}"]) + "\n")
        add(f"{rng.choice(ROLES)} 지원\n")
    elif where == "title":
        add(rng.choice(["이력서 — ", "자기소개서 ", "이 력 서 | ", "[이력서] "]))
        add(name, True)
        add("\n")
    elif where == "role":
        add(rng.choice(["", "이력서\n\n"]))
        add(name, True)
        add(f"\n{rng.choice(ROLES)} · {rng.randint(1, 12)}년차\n")
    else:
        add(rng.choice(["이력서\n", "자기소개서\n", "경력기술서\n"]))
        add(f"{rng.choice(ROLES)} 지원\n")
    add("\n".join(_body(rng)) + "\n")
    if where == "signature":
        add(rng.choice(["위 기재 사항은 사실과 다름없습니다.\n", "이상의 내용은 사실임을 확인합니다.\n", ""]))
        add(f"{rng.randint(2025, 2026)}년 {rng.randint(1, 12)}월 {rng.randint(1, 28)}일\n")
        add(name, True)
        add(rng.choice(["", " (서명)", " (인)", "\n"]))
    text, gold, at = "", [], 0
    for chunk, is_name in parts:
        if is_name:
            gold.append(("person", at, at + len(chunk)))
        text += chunk
        at += len(chunk)
    return text, gold


def pages(seed: int, n: int) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``n`` pages drawn with ``seed`` (1: tune, 2: report)."""
    rng = random.Random(seed)
    return [page(rng) for _ in range(n)]
