"""Derived queries (search ``expand``) on the embedded model: how often they run, and what they add.

    python -m bench.expand [--queries 20]

The mesh as processes with default settings (embedding, retrieval, the embedded LLM server, the
reasoning service, a gateway); collection "mq" holds the passages of bench/data/paraphrase_ko.json.
Per query of that set's first ``--queries`` needs: the plain search (default deadline), then the
same query with ``expand: {"n": 3}`` and ``X-Request-Timeout-Ms`` of twice ``expand_min_s`` plus
its margin (what the gateway's refusal asks for): ``expansion.status``, the search's latency and the
derived-query call's own time. Once: ``expand`` on the default 2 s search deadline, which must be
refused up front (400 naming ``expand``), not run to fail.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import ROOT, free_port, md_table, start_retrieval_pair, start_service, stop_service
from bench.multi_query import ingest
from bench.report import write_result
from gateway.config import GatewaySettings
from infra.llm.server import start_llm_server
from services.runtime.models import current_model_dir

DATA = ROOT / "bench" / "data" / "paraphrase_ko.json"


def main() -> None:
    """Start the mesh, measure, write bench/results/expand.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.expand", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--skip", type=int, default=0, help="start at this query of the set (a tune run takes "
                                                             "the first ones, a report run the next)")
    parser.add_argument("--min-s", type=float, default=None,
                        help="the gateway's expand_min_s for this run (default: its setting's default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    queries = [q["query"] for q in data["queries"][args.skip:args.skip + args.queries]]
    min_s = args.min_s if args.min_s is not None else GatewaySettings.model_fields["expand_min_s"].default
    timeout_ms = int((min_s * 2 + 0.25) * 1000)
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-expand-"))
    procs: list = []
    llm = start_llm_server(free_port(), log_path=folder / "llm.log")
    rows = []
    try:
        emb_port, ret_port = start_retrieval_pair(folder / "qdrant", current_model_dir().resolve(), procs)
        rs, rs_port = start_service("services.reasoning", "--backend-url", llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target",
                                    f"127.0.0.1:{ret_port}", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--expand-min-s", str(min_s))
        procs.append(gw)
        base = f"http://127.0.0.1:{gw_port}"
        ingest(base, data["passages"])
        with httpx.Client(base_url=base, timeout=60) as http:
            refused = http.post("/v1/search", json={"collection": "mq", "query": queries[0], "expand": {"n": 3}})
            for q in queries:
                t = time.perf_counter()
                plain = http.post("/v1/search", json={"collection": "mq", "query": q, "top_k": 10})
                plain_ms = (time.perf_counter() - t) * 1e3
                t = time.perf_counter()
                r = http.post("/v1/search", headers={"X-Request-Timeout-Ms": str(timeout_ms)},
                              json={"collection": "mq", "query": q, "top_k": 10, "expand": {"n": 3}})
                ms = (time.perf_counter() - t) * 1e3
                body = r.json()
                exp = body.get("expansion") or {}
                rows.append({"query": q, "status": r.status_code, "plain_status": plain.status_code,
                             "expansion": exp.get("status"), "reason": exp.get("reason"), "derived": exp.get("derived"),
                             "expand_call_ms": exp.get("ms"), "search_ms": round(ms, 1),
                             "plain_ms": round(plain_ms, 1)})
                print(f"[bench] {rows[-1]}", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
        shutil.rmtree(folder, ignore_errors=True)
    ok = [row for row in rows if row["expansion"] == "ok"]
    share = len(ok) / len(rows)
    added = statistics.median(row["search_ms"] - row["plain_ms"] for row in rows)
    calls = sorted(row["expand_call_ms"] for row in rows if row["expand_call_ms"] is not None)
    refused_json = refused.json()
    refusal_ok = refused.status_code == 400 and refused_json["error"]["fields"][0]["field"] == "expand"
    reasons: dict[str, int] = {}
    for row in rows:
        if row["expansion"] != "ok":
            reasons[str(row["reason"])] = reasons.get(str(row["reason"]), 0) + 1
    body_lines = [
        f"- {len(rows)} queries of paraphrase-ko (from its query {args.skip}), `expand: {{\"n\": 3}}`, "
        f"`X-Request-Timeout-Ms: {timeout_ms}` (half "
        f"of it, {timeout_ms / 2000:.2f} s, is the derived queries' budget; `expand_min_s` {min_s:g}); the embedded "
        "model on two cores, default settings otherwise.",
        "",
        md_table(["figure", "value"], [
            ["derived queries searched (`expansion.status: ok`)", f"{len(ok)} of {len(rows)} ({share:.0%})"],
            ["failures by reason", json.dumps(reasons, ensure_ascii=False) if reasons else "none"],
            ["the derived-query call, p50 / max ms", f"{statistics.median(calls):.0f} / {calls[-1]:.0f}" if calls
             else "-"],
            ["added to the search, p50 ms (expand − plain)", f"{added:.0f}"],
            ["`expand` on the default 2 s search deadline", f"{refused.status_code} "
             f"{'(refused up front, naming expand)' if refusal_ok else refused.text[:120]}"],
        ]),
        "",
        f"Target: `expand` succeeds ≥ 95 % within its stated budget on the embedded model, or is refused up front: "
        f"{'met' if share >= 0.95 and refusal_ok else 'see the figures'}.",
    ]
    name = "expand" if args.min_s is None else f"expand_min{args.min_s:g}"
    print(write_result(name, "Derived queries on the embedded model", body_lines,
                       {"rows": rows, "ok_share": share, "added_ms_p50": added, "refused_status": refused.status_code,
                        "timeout_ms": timeout_ms, "min_s": min_s, "skip": args.skip}, out=args.out))


if __name__ == "__main__":
    main()
