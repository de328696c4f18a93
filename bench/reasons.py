"""Recommendation reasons on the embedded model: the share of cards with a reason that passes, and the wait.

    python -m bench.reasons [--splits tune,report] [--limit N] [--name reasons]

Processes on loopback: the embedded LLM (llama.cpp server), the reasoning service, embedding, retrieval
and a gateway. Both catalogs are ingested — the demo's (gateway/sample_catalog.json, collection ``demo``)
and the gift catalog (bench/data/gift_catalog.json, ``gifts``) — and each query of
bench/data/reasons_eval.json (its ``about`` says which split shaped what) is sent to
``POST /v1/recommendations:stream`` with ``top_k`` 5 and its price filter. Measured per split:

- **model reasons passing**: cards whose reason the model wrote and the checks passed (``ok`` or
  ``regenerated``, ``source: model``), out of all cards;
- **any reason**: cards with a reason of either source (``source: rule`` is code's factual fallback);
- the checks' verdicts per kind on the cards that failed their first answer;
- **first card** (the first ``reason`` event) and **all cards** (``done``), p50 and max, from the request;
- a sample of reasons as written, for a person to read.
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

from bench.common import ROOT, free_port, ingest_catalog, md_table, start_llm_mesh, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server

DATA = Path(__file__).parent / "data"
CASES = DATA / "reasons_eval.json"
COLLECTIONS = {"gateway/sample_catalog.json": "demo", "bench/data/gift_catalog.json": "gifts"}


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def one(http: httpx.Client, case: dict, top_k: int = 5) -> dict[str, Any]:
    """One query's stream: its cards' reasons and the times to the first reason and to ``done``."""
    body: dict[str, Any] = {"collection": COLLECTIONS[case["catalog"]], "query": case["query"], "top_k": top_k}
    if case.get("filter", {}).get("max_price") is not None:
        body["filter"] = {"must": [{"field": "price", "lte": case["filter"]["max_price"]}]}
    t0 = time.perf_counter()
    first: float | None = None
    done: float | None = None
    cards: dict[str, dict] = {}
    reasons: dict[str, dict] = {}
    event = ""
    error = None
    with http.stream("POST", "/v1/recommendations:stream", json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                if event == "cards":
                    cards = {c["id"]: c for c in data["cards"]}
                elif event == "reason":
                    first = first if first is not None else (time.perf_counter() - t0) * 1e3
                    reasons[data["id"]] = data
                elif event == "done":
                    done = (time.perf_counter() - t0) * 1e3
                elif event == "error":
                    error = data
    return {"query": case["query"], "collection": body["collection"], "first_ms": first, "all_ms": done,
            "error": error, "cards": [{"id": i, "text": c["text"], "payload": c.get("payload"),
                                       **reasons.get(i, {"status": None})}
                                      for i, c in cards.items()]}


def _model(card: dict) -> bool:
    return card.get("status") in ("ok", "regenerated") and card.get("source", "model") == "model"


def summary(runs: list[dict]) -> dict[str, Any]:
    """The split's figures."""
    cards = [c for r in runs for c in r["cards"]]
    kinds: dict[str, int] = {}
    for c in cards:
        for k in c.get("violations") or []:
            kinds[k] = kinds.get(k, 0) + 1
    firsts = [r["first_ms"] for r in runs if r["first_ms"] is not None]
    alls = [r["all_ms"] for r in runs if r["all_ms"] is not None]
    return {"queries": len(runs), "cards": len(cards),
            "model_passing": round(100 * sum(_model(c) for c in cards) / max(1, len(cards)), 1),
            "any_reason": round(100 * sum(bool(c.get("short")) for c in cards) / max(1, len(cards)), 1),
            "first_attempt_ok": round(100 * sum(c.get("status") == "ok" for c in cards) / max(1, len(cards)), 1),
            "rule": sum(c.get("source") == "rule" for c in cards), "violations": kinds,
            "first_card_ms_p50": _p50(firsts), "first_card_ms_max": round(max(firsts), 1) if firsts else None,
            "all_cards_ms_p50": _p50(alls), "all_cards_ms_max": round(max(alls), 1) if alls else None,
            "errors": [r["error"] for r in runs if r["error"]]}


def run(splits: tuple[str, ...], limit: int | None, cases: Path = CASES, top_k: int = 5) -> dict[str, Any]:
    """Start the mesh, ingest both catalogs, run the splits."""
    data = json.loads(cases.read_text(encoding="utf-8"))
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-reasons-"))
    llm = start_llm_server(free_port(), log_path=folder / "llm.log")
    procs: list = []
    out: dict[str, Any] = {"model": llm.model, "splits": list(splits), "limit": limit}
    try:
        gw_port = start_llm_mesh(llm.base_url, folder, procs)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=600,
                          headers={"X-Request-Timeout-Ms": "300000"}) as http:
            for path, name in COLLECTIONS.items():
                catalog = json.loads((ROOT / path).read_text(encoding="utf-8"))
                ingest_catalog(http, name, catalog["fields"], catalog.get("documents") or catalog["items"])
            one(http, {"catalog": "gateway/sample_catalog.json", "query": "따뜻한 선물"})  # warm the prompt cache
            for split in splits:
                runs = [one(http, case, top_k) for case in data[split][:limit]]
                out[split] = {"summary": summary(runs), "runs": runs}
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return out


def markdown(f: dict[str, Any]) -> list[str]:
    """The figures as tables, and a sample of reasons."""
    rows = []
    for split in f["splits"]:
        s = f[split]["summary"]
        rows.append([split, str(s["queries"]), str(s["cards"]), f"{s['model_passing']} %", f"{s['any_reason']} %",
                     f"{s['first_attempt_ok']} %", str(s["rule"]),
                     ", ".join(f"{k} {v}" for k, v in sorted(s["violations"].items())) or "none",
                     f"{s['first_card_ms_p50']} / {s['first_card_ms_max']}",
                     f"{s['all_cards_ms_p50']} / {s['all_cards_ms_max']}", str(len(s["errors"]))])
    lines = [md_table(["split", "queries", "cards", "model reason passes", "any reason", "passed first time",
                       "rule-written", "verdicts (first answers that failed)", "first card ms p50 / max",
                       "all cards ms p50 / max", "errors"], rows), "", "## A sample of reasons", ""]
    for split in f["splits"]:
        shown = 0
        for r in f[split]["runs"]:
            for c in r["cards"][:1]:
                if shown < 10 // len(f["splits"]) + 1:
                    lines.append(f"- {split} · `{r['query']}` · {c['text'][:40]} → {c.get('status')}"
                                 f"{' (' + c['source'] + ')' if c.get('source') else ''}: {c.get('short')} / "
                                 f"{c.get('long')}")
                    shown += 1
    return lines


def main(argv: list[str] | None = None) -> None:
    """Run and write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default="tune,report", help="splits of reasons_eval.json")
    parser.add_argument("--limit", type=int, default=None, help="at most this many queries per split")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="results folder")
    parser.add_argument("--name", default="reasons", help="result file name [reasons]")
    parser.add_argument("--cases", type=Path, default=CASES,
                        help="queries file (bench/data/reasons_graded.json: issue 81's graded set) [reasons_eval.json]")
    parser.add_argument("--top-k", type=int, default=5, help="cards per query [5]")
    args = parser.parse_args(argv)
    figures = run(tuple(args.splits.split(",")), args.limit, args.cases, args.top_k)
    body = ["- The embedded model (llama.cpp server, one slot, 2 threads), the reasoning service (600 s deadlines), "
            "embedding, retrieval and a gateway as processes on loopback; the demo catalog and the gift catalog "
            f"ingested; `POST /v1/recommendations:stream`, top {args.top_k}, one query at a time; the queries of "
            f"bench/data/{args.cases.name}.", "", *markdown(figures)]
    write_result(args.name, "Recommendation reasons", body, figures, out=args.out,
                 command=command_line("bench.reasons", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
