"""The embedded server's DRY sampling, measured where it was chosen: first answers passing every check.

    python -m bench.llm_sampling [--reps 3] [--dry 0.8] [--out bench/results]

The tuning set is bench/reasoning.py's five queries over its five items (never the report set
bench/data/reasoning_set.json, on which bench.llm_select reports the choice). Each rep runs the
embedded server once without DRY and once with it, interleaved, and sends each query once, in the
service's own prompt and JSON schema (services/reasoning/prompts.py); every card of the first answer
goes through the service's checks (services/reasoning/checks.py). No regeneration: this counts what
the sampling alone gets right.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import free_port, machine_info, md_table
from bench.reasoning import ITEMS, STREAM_QUERIES
from infra.llm.server import DRY_MULTIPLIER, start_llm_server
from services.reasoning.checks import check_reason
from services.reasoning.prompts import reasons_messages, reasons_schema


def first_answer(base_url: str, model: str, query: str) -> dict:
    """One reasons answer for ``query``: its seconds, tokens and each card's failed checks."""
    rows = [(i.id, i.title, i.description) for i in ITEMS]
    body = {"model": model, "messages": reasons_messages(query, rows), "max_tokens": 1024, "temperature": 0.3,
            "response_format": {"type": "json_object", "schema": reasons_schema([r[0] for r in rows])}}
    start = time.perf_counter()
    resp = httpx.post(f"{base_url}/chat/completions", json=body, timeout=600)
    resp.raise_for_status()
    seconds = time.perf_counter() - start
    data = resp.json()
    cards = json.loads(data["choices"][0]["message"]["content"])["reasons"]
    failed = []
    for card in cards:
        item = next(i for i in ITEMS if i.id == card["id"])
        others = [(o.title, o.description) for o in ITEMS if o.id != item.id]
        findings = check_reason(card["short"], card["long"], title=item.title, description=item.description,
                                query=query, others=others)
        failed.append(sorted({f.kind for f in findings}))
    return {"query": query, "seconds": seconds, "completion_tokens": data["usage"]["completion_tokens"],
            "cards": len(cards), "passing": sum(not f for f in failed), "failed": failed}


def run(reps: int, dry: float) -> dict[str, list[dict]]:
    """Every rep: the server without DRY, then with it; each query once per server."""
    out: dict[str, list[dict]] = {"0.0": [], str(dry): []}
    for rep in range(reps):
        for multiplier in (0.0, dry):
            server = start_llm_server(free_port(), dry_multiplier=multiplier,
                                      log_path=Path(tempfile.mkdtemp()) / "llm.log")
            try:
                for query in STREAM_QUERIES:
                    r = first_answer(server.base_url, server.model, query)
                    out[str(multiplier)].append({"rep": rep, **r})
                    print(f"[sampling] rep {rep} dry {multiplier}: {query}: {r['passing']}/{r['cards']} "
                          f"passing, {r['seconds']:.1f} s", flush=True)
            finally:
                server.stop()
    return out


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_sampling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of both settings [default 3]")
    parser.add_argument("--dry", type=float, default=DRY_MULTIPLIER,
                        help=f"the DRY multiplier to compare with none [default {DRY_MULTIPLIER}]")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    results = run(args.reps, args.dry)
    info = machine_info()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for setting, answers in results.items():
        passing, cards = sum(a["passing"] for a in answers), sum(a["cards"] for a in answers)
        rows.append([f"DRY {setting}", str(len(answers)), f"{passing}/{cards} ({passing / cards:.0%})",
                     f"{statistics.median(a['seconds'] for a in answers):.1f}",
                     f"{statistics.median(a['completion_tokens'] for a in answers):.0f}"])
    lines = ["# DRY sampling on the tuning queries (first answers, no regeneration)", "",
             f"Run {now} with `python -m bench.llm_sampling --reps {args.reps} --dry {args.dry}`.", "",
             f"- Machine: {info['cpu']}, {info['cores']} cores ({info['simd']}), {info['memory']}.",
             "- Set: bench/reasoning.py's 5 queries x 5 items (the tuning set; the report set is "
             "bench/data/reasoning_set.json, bench.llm_select).", "",
             md_table(["sampling", "answers", "cards passing every check", "seconds p50", "tokens p50"], rows), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "llm_sampling.md").write_text("\n".join(lines))
    (args.out / "llm_sampling.json").write_text(json.dumps({"run": now, "machine": info, "reps": args.reps,
                                                            "results": results}, ensure_ascii=False, indent=1))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
