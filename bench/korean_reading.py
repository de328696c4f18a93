"""Korean values and names read by code: each set's figures per split, and the time per 16k characters.

    python -m bench.korean_reading [--split report] [--repeat 20]

- **values** (bench/data/korean_values_eval.json, reference date 2026-12-07): every amount of an amount
  phrase (value, bound, range, foreign currency), the first date phrase of a date phrase (date, time,
  range end), the first time of day of a time phrase, the first duration of a duration phrase (and no time
  of day). A case is right when all of it is.
- **names** (bench/names_set.py, seed 1 tune, 2 report; 60 pages): the personal-data detector's
  ``person`` spans against each page's unlabelled name: recall, and precision over every person span.
- **speed**: ``dates.scan``, ``amounts.amounts`` and the detector over 16k characters of the project's
  policy documents (bench/data/answers_ko.json) and of dense text (a date and an amount every ~40
  characters), median of ``--repeat`` runs, and a 200k-character text made to be slow (digits and dots,
  일 and 월 without end) once, stopped after a minute.

``--module-root`` runs the same cases against another checkout (the figures before a change).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from bench.common import md_table
from bench.report import write_result

DATA = Path(__file__).parent / "data" / "korean_values_eval.json"
NAME_SEEDS = {"tune": 1, "report": 2}


def _amounts_of(text: str) -> list[dict[str, Any]]:
    from services.runtime.korean.amounts import amounts
    got: list[dict[str, Any]] = []
    for a in amounts(text):
        high = getattr(a, "high", None)
        if a.bound == "range" and high is not None:
            got.append({"low": a.value, "high": high})
            continue
        g: dict[str, Any] = {"value": a.value}
        if a.bound:
            g["bound"] = a.bound
        if a.currency not in (None, "KRW"):
            g["currency"] = a.currency
        got.append(g)
    return got


def _time_of(text: str) -> str | None:
    from services.runtime.korean import dates
    found = dates._time_at(text)
    return found[0].strftime("%H:%M") if found else None


def _date_of(text: str, ref: date) -> dict[str, Any]:
    from services.runtime.korean import dates
    spans = dates.scan(text, ref)
    if not spans:
        return {"date": None, "time": None}
    s = spans[0]
    out: dict[str, Any] = {"date": s.start.day.isoformat(),
                           "time": s.start.at.strftime("%H:%M") if s.start.at else None}
    if s.end is not None:
        out["end_date"] = s.end.day.isoformat()
        out["end_time"] = s.end.at.strftime("%H:%M") if s.end.at else None
    return out


def _duration_of(text: str) -> dict[str, Any]:
    from services.runtime.korean import dates
    found = dates.durations(text) if hasattr(dates, "durations") else []
    return {"minutes": found[0].minutes if found else None, "time": _time_of(text)}


def read(case: dict[str, Any], ref: date) -> Any:
    """What code reads of one case, in the shape of its ``expect``."""
    kind, text = case["kind"], case["text"]
    if kind == "amount":
        return _amounts_of(text)
    if kind == "time":
        return {"time": _time_of(text)}
    if kind == "duration":
        return _duration_of(text)
    got = _date_of(text, ref)
    if "end_date" not in case["expect"]:
        got.pop("end_date", None)
        got.pop("end_time", None)
    return got


def values(split: str) -> dict[str, Any]:
    """Each case read, right or wrong, per kind."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    ref = date.fromisoformat(data["reference_date"])
    kinds: dict[str, list[int]] = {}
    misses = []
    for case in data[split]:
        try:
            got = read(case, ref)
        except Exception as exc:  # noqa: BLE001 - a reader that raises reads the case wrong
            got = f"{type(exc).__name__}: {exc}"
        ok = got == case["expect"]
        kinds.setdefault(case["kind"], [0, 0])
        kinds[case["kind"]][0] += ok
        kinds[case["kind"]][1] += 1
        if not ok:
            misses.append({"text": case["text"], "got": got, "want": case["expect"]})
    right = sum(k[0] for k in kinds.values())
    total = sum(k[1] for k in kinds.values())
    return {"right": right, "total": total, "share": right / total,
            "kinds": {k: {"right": v[0], "total": v[1]} for k, v in kinds.items()}, "misses": misses}


def names(split: str, n: int = 60) -> dict[str, Any]:
    """The detector's person spans against the pages' unlabelled names."""
    from bench.names_set import pages
    from services.ocr.pii.detector import detect
    found_gold = 0
    gold_total = 0
    true_found = 0
    found_total = 0
    misses, false = [], []
    for text, gold in pages(NAME_SEEDS[split], n):
        spans = [(s.start, s.end) for s in detect(text) if s.kind == "person"]
        gold_total += len(gold)
        found_total += len(spans)
        for _, gs, ge in gold:
            if any(s <= gs and ge <= e and (e - s) <= (ge - gs) + 1 for s, e in spans):  # the name, at most one more
                found_gold += 1
            else:
                misses.append(text[gs:ge])
        for s, e in spans:
            if any(s <= gs and ge <= e and (e - s) <= (ge - gs) + 1 for _, gs, ge in gold):
                true_found += 1
            else:
                false.append(text[s:e])
    return {"pages": n, "gold": gold_total, "recall": found_gold / max(1, gold_total),
            "precision": true_found / max(1, found_total), "found": found_total, "misses": misses[:20],
            "false_positives": false[:20]}


def _mixed_text(chars: int) -> str:
    lines = ["입금일: 3월 10일 오후 3시까지 5만 원을 보내 주세요.",
             "다음 주 화요일 14:00 면접, 이번 주말 10만원대 선물.",
             "연봉 3천5백만원, 전세 3억5천, 팔로워 3천명, 2시간 동안 회의.", "김민서 드림. 2026년 12월 7일 (월)",
             "경력사항: 네이버 백엔드 개발자 (2019.03 ~ 2023.12), 토익 900점.",
             "내일배움카드 신청은 12월 20일 밤 12시 전에."]
    out = []
    size = 0
    i = 0
    while size < chars:
        line = lines[i % len(lines)]
        out.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(out)[:chars]


def _documents(chars: int) -> str:
    """Policy documents written for the project (bench/data/answers_ko.json), repeated to ``chars``."""
    data = json.loads((Path(__file__).parent / "data" / "answers_ko.json").read_text(encoding="utf-8"))
    text = "\n".join(p["text"] for p in data["passages"])
    return (text * (chars // len(text) + 1))[:chars]


def speed(repeat: int, limit_s: int = 60) -> dict[str, Any]:
    """Milliseconds per 16k characters of each reader (median), and the crafted 200k text once."""
    from services.ocr.pii.detector import detect
    from services.runtime.korean import dates
    from services.runtime.korean.amounts import amounts
    ref = date(2026, 12, 7)
    out: dict[str, Any] = {}
    for kind, text in (("documents", _documents(16_000)), ("dense", _mixed_text(16_000))):
        readers: list[tuple[str, Callable[[str], object]]] = [
            ("dates.scan", lambda t: dates.scan(t, ref)), ("amounts", amounts), ("pii detect", detect)]
        for name, fn in readers:
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                fn(text)
                times.append((time.perf_counter() - t) * 1e3)
            out[f"{name}, {kind}"] = round(statistics.median(times), 2)
    crafted = ("1.2.3.4.5 일 월 3만 원 " * 20_000)[:200_000]

    def too_long(*_: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(limit_s)
    t = time.perf_counter()
    try:
        dates.scan(crafted, ref)
        amounts(crafted)
        out["crafted 200k (scan + amounts), ms"] = round((time.perf_counter() - t) * 1e3, 1)
    except TimeoutError:
        out["crafted 200k (scan + amounts), ms"] = f"> {limit_s * 1000} (stopped)"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the sets of one split and the speed check; write bench/results/korean_reading[_<name>].{md,json}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "report"), default="report")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--module-root", type=Path, default=None,
                        help="read with the services package of another checkout (the figures before a change)")
    parser.add_argument("--name", default="korean_reading", help="the result file's name")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.module_root is not None:
        sys.path.insert(0, str(args.module_root.resolve()))
        for mod in [m for m in sys.modules if m.startswith("services")]:
            del sys.modules[mod]
    v = values(args.split)
    nm = names(args.split)
    sp = speed(args.repeat)
    body = [
        f"- Split **{args.split}**. Values: bench/data/korean_values_eval.json (reference date 2026-12-07); names: "
        f"bench/names_set.py seed {NAME_SEEDS[args.split]}, {nm['pages']} pages.",
        "",
        md_table(["set", "right", "of", "share"],
                 [[f"values: {k}", str(x["right"]), str(x["total"]), f"{x['right'] / x['total']:.1%}"]
                  for k, x in v["kinds"].items()]
                 + [["values: all", str(v["right"]), str(v["total"]), f"{v['share']:.1%}"],
                    ["unlabelled names: recall", "", str(nm["gold"]), f"{nm['recall']:.1%}"],
                    ["unlabelled names: precision", "", str(nm["found"]), f"{nm['precision']:.1%}"]]),
        "",
        md_table(["reader", "ms per 16k characters (median)"], [[k, str(x)] for k, x in sp.items()]),
        "",
        "Values read wrong: " + ("; ".join(f"`{m['text']}` got {m['got']} want {m['want']}" for m in v["misses"])
                                 or "none") + ".",
        "",
        "Names missed: " + (", ".join(nm["misses"]) or "none") + ". Person spans that are no name: "
        + (", ".join(nm["false_positives"]) or "none") + ".",
    ]
    figures = {"split": args.split, "values": v, "names": nm, "speed": sp}
    if args.no_write:
        print("\n".join(body))
        return
    print(write_result(args.name, "Korean values and names read by code", body, figures))


if __name__ == "__main__":
    main()
