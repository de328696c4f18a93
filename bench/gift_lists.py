"""A gift conversation's end on the embedded model: the reply, the confirm screen, and the two lists.

    python -m bench.gift_lists [--limit N] [--name gift_lists]

Processes on loopback: the embedded LLM (llama.cpp server), the reasoning service, embedding,
retrieval and a gateway; ``bench/data/gift_catalog.json`` ingested as ``gifts``; the conversations of
``bench/data/gift_lists_eval.json`` (written before any run of this code; its ``about`` says so). Per
conversation: the first turn through ``turns:stream`` (the reply's time and whether it was kept), the
other turns, ``:confirm``, then a list job with reasons and one without. Measured:

- **summary**: kept within the 5 s deadline (share), the confirm's wall time (never late), and factual
  errors in the summaries kept — a number, recipient, occasion, category or attribute outside the
  *expected* profile (the checker of gateway/conversations/confirm.py run against the gold profile,
  so a profile code got wrong still counts against the summary); every summary is listed to read.
- **keywords**: precision and recall against the hand-picked keywords (spaces ignored).
- **lists**: items in either list of an excluded category, with a forbidden attribute or outside the
  budget (target 0); must-have recall of the gift list (the share of the catalog items meeting every
  expected constraint in it, out of at most its length) beside a hand-written search of the same length
  (``search_of`` on the gold profile); reason calls kept per query; time to lists p50/p95 with and
  without reasons (client side, from the POST to the job's end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import free_port, ingest_catalog, md_table, start_llm_mesh, stop_service
from bench.conversations import CATALOG, gold_profile, relevant, vocabulary
from bench.report import command_line, write_result
from gateway.conversations import confirm
from gateway.conversations.query import Fields, search_of
from infra.llm.server import start_llm_server

DATA = Path(__file__).parent / "data"
CASES = DATA / "gift_lists_eval.json"
TOP_K = 5


def pct(values: list[float]) -> float | None:
    """A mean as a percentage, None for none."""
    return round(100 * statistics.fmean(values), 1) if values else None


def p95(values: list[float]) -> float | None:
    """The 95th percentile (nearest rank)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered) + 0.5) - 1)], 1)


def squash(word: str) -> str:
    """A keyword compared without spaces."""
    return "".join(word.split())


def violations(items: list[dict], gold: dict, catalog: dict[str, dict]) -> int:
    """Items of an excluded category, with a forbidden attribute, or outside the expected budget."""
    bad = 0
    for item in items:
        p = catalog[item["id"]]["payload"]
        bad += int(p["category"] in gold["excluded_categories"] or bool(set(p["tags"]) & set(gold["forbidden"]))
                   or (gold["budget_min"] is not None and p["price"] < gold["budget_min"])
                   or (gold["budget_max"] is not None and p["price"] > gold["budget_max"]))
    return bad


def lists_job(http: httpx.Client, cid: str, **body: Any) -> tuple[dict, float]:
    """One list job to its end: its record and the client's time."""
    t = time.perf_counter()
    job = http.post(f"/v1/conversations/{cid}/lists", json={"top_k": TOP_K, **body}).json()
    while True:
        record = http.get(f"/v1/conversations/{cid}/lists/{job['id']}").json()
        if record["state"] not in ("queued", "running"):
            return record, (time.perf_counter() - t) * 1e3
        time.sleep(0.05)


def reply_of(http: httpx.Client, cid: str, text: str) -> dict:
    """A turn through turns:stream: the reply event."""
    event, out = "", {}
    with http.stream("POST", f"/v1/conversations/{cid}/turns:stream", json={"text": text}) as resp:
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event in ("reply", "error"):
                out = {"event": event, **json.loads(line[6:])}
    return out


def case_run(http: httpx.Client, case: dict, catalog: dict) -> dict[str, Any]:
    """One conversation from its first turn to both lists."""
    vocab = vocabulary(catalog)
    items = {i["id"]: i for i in catalog["items"]}
    gold = case["gold"]
    cid = http.post("/v1/conversations", json={"collection": "gifts", "categories": list(vocab.categories),
                                               "attributes": list(vocab.attributes)}).json()["id"]
    reply = reply_of(http, cid, case["turns"][0])
    for text in case["turns"][1:]:
        http.post(f"/v1/conversations/{cid}/turns", json={"text": text}).raise_for_status()
    t = time.perf_counter()
    confirmed = http.post(f"/v1/conversations/{cid}:confirm").json()
    confirm_ms = (time.perf_counter() - t) * 1e3
    summary = confirmed.get("summary")
    factual = confirm.unfaithful(summary, gold_profile(gold), vocab) if summary else []
    shown, hand = {squash(k) for k in confirmed.get("keywords", [])}, {squash(k) for k in case["keywords"]}
    with_reasons, ms = lists_job(http, cid, reasons=True)
    without, bare_ms = lists_job(http, cid, reasons=False)
    code_only, code_ms = lists_job(http, cid, reasons=False, derived=0)
    result = with_reasons.get("result") or {}
    gift, mine = result.get("gift", []), result.get("self", [])
    wanted = relevant(catalog["items"], gold)
    hand_hits = http.post("/v1/search", json={"collection": "gifts",
                                              **search_of(gold_profile(gold), Fields(), TOP_K)}).json()["hits"]
    denominator = min(TOP_K, len(wanted)) if wanted else 0
    queries = [q for qs in (result.get("queries") or {}).values() for q in qs
               if any(i["query"] == q["query"] for i in gift + mine)]
    return {"turns": case["turns"], "reply": reply.get("text"), "reply_error": reply.get("error"),
            "reply_ms": reply.get("ms"), "asked": reply.get("asked"),
            "summary": summary, "summary_error": confirmed.get("summary_error"),
            "summary_ms": confirmed.get("summary_ms"), "confirm_ms": round(confirm_ms, 1), "factual_errors": factual,
            "keywords": confirmed.get("keywords", []), "hand_keywords": case["keywords"],
            "keyword_precision": len(shown & hand) / len(shown) if shown else None,
            "keyword_recall": len(shown & hand) / len(hand) if hand else None,
            "state": with_reasons["state"], "errors": with_reasons.get("errors"),
            "gift": [i["id"] for i in gift], "self": [i["id"] for i in mine],
            "forbidden": violations(gift + mine, gold, items),
            "recall": len({i["id"] for i in gift} & wanted) / denominator if denominator else None,
            "hand_recall": len({h["id"] for h in hand_hits} & wanted) / denominator if denominator else None,
            "reasons": [{"query": q["query"], "status": q["reason_status"], "reason": q.get("reason"),
                         "error": q.get("reason_error")} for q in queries],
            "shown": [{"list": name, "id": i["id"], "title": items[i["id"]]["text"], "query": i["query"],
                       "reason": i.get("reason"), "reason_source": i.get("reason_source")}
                      for name, shown_items in (("gift", gift), ("self", mine)) for i in shown_items],
            "expansion": result.get("expansion"), "timings": result.get("timings"),
            "lists_ms": round(ms, 1), "lists_no_reasons_ms": round(bare_ms, 1), "lists_code_only_ms": round(code_ms, 1)}


def figures(rows: list[dict]) -> dict[str, Any]:
    """The bench's figures over every conversation."""
    kept = [r for r in rows if r["summary"]]
    recalls = [(r["recall"], r["hand_recall"]) for r in rows if r["recall"] is not None]
    reasons = [q for r in rows for q in r["reasons"]]
    return {
        "conversations": len(rows),
        "summary_kept_pct": pct([float(bool(r["summary"]) and (r["summary_ms"] or 0) <= 5000) for r in rows]),
        "summary_errors": {e: sum(1 for r in rows if (r["summary_error"] or "").split(":")[0] == e)
                           for e in {(r["summary_error"] or "").split(":")[0] for r in rows if r["summary_error"]}},
        "confirm_p50_ms": round(statistics.median(r["confirm_ms"] for r in rows), 1) if rows else None,
        "confirm_max_ms": max((r["confirm_ms"] for r in rows), default=None),
        "factual_errors_in_kept": sum(len(r["factual_errors"]) for r in kept),
        "keyword_precision_pct": pct([r["keyword_precision"] for r in rows if r["keyword_precision"] is not None]),
        "keyword_recall_pct": pct([r["keyword_recall"] for r in rows if r["keyword_recall"] is not None]),
        "forbidden_items": sum(r["forbidden"] for r in rows),
        "must_have_recall_pct": pct([a for a, _ in recalls]), "hand_recall_pct": pct([b for _, b in recalls]),
        "reason_ok_pct": pct([float(q["status"] == "ok") for q in reasons]), "reason_calls": len(reasons),
        "lists_p50_ms": round(statistics.median(r["lists_ms"] for r in rows), 1) if rows else None,
        "lists_p95_ms": p95([r["lists_ms"] for r in rows]),
        "lists_no_reasons_p50_ms": round(statistics.median(r["lists_no_reasons_ms"] for r in rows), 1)
        if rows else None,
        "lists_no_reasons_p95_ms": p95([r["lists_no_reasons_ms"] for r in rows]),
        "lists_code_only_p50_ms": round(statistics.median(r["lists_code_only_ms"] for r in rows), 1)
        if rows else None,
        "lists_code_only_p95_ms": p95([r["lists_code_only_ms"] for r in rows]),
        "reply_kept_pct": pct([float(bool(r["reply"])) for r in rows]),
        "reply_p50_ms": round(statistics.median(r["reply_ms"] for r in rows if r["reply_ms"] is not None), 1)
        if any(r["reply_ms"] is not None for r in rows) else None,
        "failed_jobs": sum(1 for r in rows if r["state"] != "succeeded")}


def markdown(f: dict[str, Any], rows: list[dict], split: str) -> list[str]:
    """The result page."""
    table = [["summary kept within 5 s", f"{f['summary_kept_pct']} %", "≥ 90 %"],
             ["confirm wall time p50 / max", f"{f['confirm_p50_ms']} / {f['confirm_max_ms']} ms", "never late"],
             ["factual errors in kept summaries", str(f["factual_errors_in_kept"]), "0"],
             ["keyword precision / recall", f"{f['keyword_precision_pct']} % / {f['keyword_recall_pct']} %", "–"],
             ["forbidden or over-budget items in either list", str(f["forbidden_items"]), "0"],
             ["must-have recall (gift list) / hand-written search", f"{f['must_have_recall_pct']} % / "
              f"{f['hand_recall_pct']} %", "≥ hand − 5"],
             ["reason calls kept (per query)", f"{f['reason_ok_pct']} % of {f['reason_calls']}", "–"],
             ["time to lists with reasons p50 / p95", f"{f['lists_p50_ms']} / {f['lists_p95_ms']} ms", "p95 ≤ 20 s"],
             ["time to lists without reasons p50 / p95",
              f"{f['lists_no_reasons_p50_ms']} / {f['lists_no_reasons_p95_ms']} ms", "p95 ≤ 1 s"],
             ["time to lists without any LLM call (no derived queries) p50 / p95",
              f"{f['lists_code_only_p50_ms']} / {f['lists_code_only_p95_ms']} ms", "–"],
             ["turn reply kept / p50", f"{f['reply_kept_pct']} % / {f['reply_p50_ms']} ms", "–"],
             ["failed list jobs", str(f["failed_jobs"]), "0"]]
    out = [f"- {f['conversations']} conversations of bench/data/gift_lists_eval.json (split `{split}`); lists of "
           f"{TOP_K} items; "
           f"summary errors: {f['summary_errors'] or 'none'}.", "",
           md_table(["measure", "value", "target"], table), "", "## Per conversation", ""]
    for r in rows:
        out += [f"- **{' / '.join(r['turns'])}**",
                f"  - reply ({r['reply_ms']} ms, asked {r['asked']}): "
                f"{r['reply'] or '(null: ' + str(r['reply_error']) + ')'}",
                f"  - summary ({r['summary_ms']} ms): {r['summary'] or '(null: ' + str(r['summary_error']) + ')'}"
                + (f" — factual errors: {r['factual_errors']}" if r["factual_errors"] else ""),
                f"  - keywords: {', '.join(r['keywords'])} (hand: {', '.join(r['hand_keywords'])})",
                f"  - gift: {', '.join(r['gift'])}; self: {', '.join(r['self'])}; forbidden {r['forbidden']}; "
                f"recall {r['recall']} (hand {r['hand_recall']}); lists {r['lists_ms']} ms "
                f"({r['lists_no_reasons_ms']} ms without reasons); stages {r['timings']}",
                *(f"  - reason for “{q['query']}”: {q['reason'] or q['status'] + ' (' + str(q['error']) + ')'}"
                  for q in r["reasons"])]
    return out


def main(argv: list[str] | None = None) -> None:
    """Start the mesh, run the conversations, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.gift_lists", description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="report2", help="a split of bench/data/gift_lists_eval.json")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--name", default="gift_lists")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    cases = json.loads(CASES.read_text(encoding="utf-8"))[args.split][:args.limit]
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-gift-lists-"))
    llm = start_llm_server(free_port(), log_path=folder / "llm.log")
    procs: list = []
    rows: list[dict] = []
    try:
        gw = start_llm_mesh(llm.base_url, folder, procs)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw}", timeout=600,
                          headers={"X-Request-Timeout-Ms": "300000"}) as http:
            ingest_catalog(http, "gifts", catalog["fields"], catalog["items"])
            for case in cases:
                rows.append(case_run(http, case, catalog))
                print(json.dumps({k: rows[-1][k] for k in ("summary", "summary_error", "lists_ms", "forbidden",
                                                           "recall")}, ensure_ascii=False), flush=True)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    f = figures(rows)
    print(write_result(args.name, "A gift conversation's end: reply, confirm, lists", markdown(f, rows, args.split),
                       {"figures": f, "cases": rows}, out=args.out, command=command_line("bench.gift_lists", argv)))


if __name__ == "__main__":
    main()
