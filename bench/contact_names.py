r"""Names in résumé contact lines: recall and precision of the personal-data detector (issue 77, item 10).

The set was written after the contact-line reader (services/ocr/pii/recognizers.py,
``contact_line_persons``) and is not used to choose anything: it is measured once and reported. Each page
is a résumé whose first line is the applicant's contact line, in one of five header styles:

- ``김주원  |  010.5856.8366  |  kim.81@example.com`` (bars),
- ``이서연 · 010-1234-5678 · seoyeon@mail.kr`` (middle dots),
- ``박지훈 / 010 2222 3333 / github.com/jihoon`` (slashes),
- ``최민준    010-5555-1234    choi@ex.co.kr`` (runs of spaces),
- ``정하늘 010-3333-4444 sky@ex.com`` (single spaces),

the name sometimes with its hanja or roman spelling in brackets, the fields after it in any order
(phone, e-mail, a portfolio URL, a city). The rest of the page holds what is not a name: the role line,
headings, companies with their periods, and look-alike lines (words starting with a surname's syllable),
some of them also split by bars (``카카오 | 2021.03 - 2023.08``). Surnames and given syllables are drawn
from lists wider than the team's tune set (bench/names_set.py), compound surnames included.

Recall: the applicant's name found (a person span exactly on it). Precision: person spans that are the
name, over every person span on the pages.

    python -m bench.contact_names [--pages 300] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import time

from bench.names_set import COMPANIES, HEADINGS, LOOKALIKES, ROLES

SURNAMES = ("김 이 박 최 정 강 조 윤 장 임 한 오 서 신 권 황 안 송 전 홍 유 고 문 양 손 배 백 허 남 심 노 하 곽 "
            "성 차 주 우 구 민 류 나 진 지 엄 채 원 천 방 공 현 함 변 염 여 추 도 소 석 선 설 마 길 연 위 "
            "표 명 기 반 왕 금 옥 육 인 맹 제 모 탁 국 어 은 편 용 예 경 봉 사 황보 남궁 제갈 선우 독고").split()
GIVEN = "민서준지현우수영윤하은도예주연진호성재원승유정태혜나희경동상기미아채소다건시한결린율온솔빈람혁훈찬규범철"
ROMAN_GIVEN = ["Minseo", "Jiwoo", "Seoyeon", "Dohyun", "Hayoon", "Junho", "Yuna", "Taeyang", "Sol", "Eunji"]
HANJA = "金李朴崔鄭姜趙尹張林韓吳徐申權黃安宋全洪柳高文梁孫裵白許南沈盧河郭成車朱禹具閔"
CITIES = ["서울", "서울 강남구", "경기 성남시", "부산", "대전 유성구", "인천 연수구", "판교"]
STYLES = {"bars": "  |  ", "dots": " · ", "slashes": " / ", "spaces": "    ", "single": " "}


def _name(rng: random.Random) -> str:
    given = "".join(rng.choice(GIVEN) for _ in range(rng.choice((2, 2, 2, 2, 1))))
    return rng.choice(SURNAMES) + given


def _phone(rng: random.Random) -> str:
    sep = rng.choice(["-", ".", " "])
    return f"010{sep}{rng.randint(1000, 9999)}{sep}{rng.randint(1000, 9999)}"


def _fields(rng: random.Random) -> list[str]:
    user = "".join(rng.choice("abcdefghijklmnoprstuwy") for _ in range(rng.randint(3, 8))) + str(rng.randint(1, 99))
    out = [_phone(rng), f"{user}@{rng.choice(['gmail.com', 'naver.com', 'example.com', 'mail.kr'])}"]
    if rng.random() < 0.4:
        out.append(rng.choice([f"github.com/{user}", f"https://{user}.dev", f"blog.naver.com/{user}"]))
    if rng.random() < 0.4:
        out.append(rng.choice(CITIES))
    rng.shuffle(out)
    return out[: rng.randint(1, len(out))]


def page(rng: random.Random, style: str) -> tuple[str, str]:
    """One résumé page in ``style``: (text, the applicant's name)."""
    name = _name(rng)
    head = name
    if rng.random() < 0.2:
        head += f" ({rng.choice(HANJA)}{''.join(rng.choice('旻瑞智賢俊宇秀英允河恩道') for _ in range(len(name) - 1))})"
    elif rng.random() < 0.15:
        head += f" ({rng.choice(ROMAN_GIVEN)} Kim)"
    sep = STYLES[style]
    lines = [sep.join([head, *_fields(rng)])]
    lines.append(f"{rng.choice(ROLES)}{sep}{rng.randint(1, 12)}년차" if rng.random() < 0.6 else rng.choice(ROLES))
    for heading in rng.sample(HEADINGS, 3):
        lines.append(heading)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.4:
                y = rng.randint(2012, 2024)
                lines.append(f"{rng.choice(COMPANIES)}{sep}{y}.{rng.randint(1, 12):02d} - {y + rng.randint(1, 3)}."
                             f"{rng.randint(1, 12):02d}")
            else:
                lines.append(f"- {rng.choice(LOOKALIKES)}")
    return "\n".join(lines), name


def measure(pages: int, seed: int) -> dict:
    """Recall and precision per header style and overall."""
    from services.ocr.pii.detector import detect

    rng = random.Random(seed)
    per: dict[str, dict[str, int]] = {s: {"pages": 0, "found": 0, "spans": 0, "right": 0} for s in STYLES}
    missed: list[str] = []
    wrong: list[str] = []
    t = time.perf_counter()
    for i in range(pages):
        style = list(STYLES)[i % len(STYLES)]
        text, name = page(rng, style)
        spans = [s for s in detect(text) if s.kind == "person"]
        hit = [s for s in spans if text[s.start:s.end] == name and s.start == text.index(name)]
        row = per[style]
        row["pages"] += 1
        row["found"] += bool(hit)
        row["spans"] += len(spans)
        row["right"] += len(hit)
        if not hit and len(missed) < 8:
            missed.append(text.splitlines()[0])
        wrong += [f"{text[s.start:s.end]} ({s.rule})" for s in spans if s not in hit][: max(0, 8 - len(wrong))]
    total = {k: sum(r[k] for r in per.values()) for k in ("pages", "found", "spans", "right")}
    return {"per_style": per, "total": total, "recall": total["found"] / total["pages"],
            "precision": total["right"] / max(1, total["spans"]), "missed": missed, "wrong": wrong,
            "ms_per_page": (time.perf_counter() - t) * 1e3 / pages}


def main() -> None:
    """Measure and write bench/results/contact_names.md."""
    from bench.report import write_result

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    got = measure(args.pages, args.seed)
    rows = [f"| {style} | {r['pages']} | {r['found'] / r['pages']:.3f} | "
            f"{r['right'] / max(1, r['spans']):.3f} |" for style, r in got["per_style"].items()]
    body = [f"bench/contact_names.py, seed {args.seed}, {args.pages} résumé pages (written after the reader, "
            "measured once).", "",
            f"**Recall {got['recall']:.3f}, precision {got['precision']:.3f}** ({got['total']['found']}/"
            f"{got['total']['pages']} names; {got['total']['right']}/{got['total']['spans']} person spans right); "
            f"{got['ms_per_page']:.2f} ms a page.", "",
            "| header style | pages | recall | precision |", "|---|---|---|---|", *rows, "",
            "Missed contact lines: " + ("; ".join(f"`{m}`" for m in got["missed"]) or "none") + ".",
            "Spans that were not the name: " + ("; ".join(f"`{w}`" for w in got["wrong"]) or "none") + "."]
    print(write_result("contact_names", "Names in résumé contact lines", body,
                       {"recall": got["recall"], "precision": got["precision"], "pages": args.pages,
                        "per_style": got["per_style"]}, command=f"python -m bench.contact_names --pages "
                                                               f"{args.pages} --seed {args.seed}"))


if __name__ == "__main__":
    main()
