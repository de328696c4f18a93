"""What tracing costs on ``/v1/search``: the mesh with every span sampled and exported vs tracing off.

    .venv/bin/python -m bench.tracing [--docs 10000] [--requests 200] [--rounds 3]

Two copies of the mesh run side by side as processes (embedding int8, retrieval on the same 10k
synthetic Korean documents, gateway): one with ``OTEL_TRACES_SAMPLER=always_off`` and no exporter,
one with ``always_on`` and the OTLP/HTTP exporter (batch processor, the SDK's defaults) sending to a
local receiver that decodes and counts every span (bench/standin.py ``OtlpSink``). Rounds alternate
between the two at concurrency 1 and 8, every query text new (the full path: embedding, retrieval).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from bench.common import md_table, start_search_mesh, stop_service
from bench.gateway import queries, search_load
from bench.report import write_result
from bench.retrieval import synthetic_catalog
from bench.standin import OtlpSink
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.runtime.models import current_model_dir


def main() -> None:
    """Run both meshes, alternate rounds, write bench/results/tracing.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=200, help="requests per round and concurrency")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    model_dir = current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    root = Path(tempfile.mkdtemp(prefix="mesh-bench-tracing-"))
    sink = OtlpSink(keep=False)
    variants = {
        "off": {"OTEL_TRACES_SAMPLER": "always_off", "OTEL_TRACES_EXPORTER": "none"},
        "on (100 %, OTLP)": {"OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_EXPORTER": "otlp",
                             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                             "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint},
    }
    procs: list = []
    p50s: dict[tuple[str, int], list[float]] = {}
    p95s: dict[tuple[str, int], list[float]] = {}
    rps: dict[tuple[str, int], list[float]] = {}
    try:
        synthetic_catalog(root / "off", args.docs, revision, KoreanAnalyzer(), "edge")
        shutil.copytree(root / "off", root / "on")
        bases = {name: start_search_mesh(root / ("off" if name == "off" else "on"), model_dir, procs, env=env)
                 for name, env in variants.items()}
        for name, base in bases.items():
            search_load(base, queries(40, 7 if name == "off" else 8), 2)  # warm-up, excluded
        seed = 1000
        for r in range(args.rounds):
            for c in (1, 8):
                order = list(bases) if r % 2 == 0 else list(reversed(bases))
                for name in order:
                    seed += 1
                    stats, throughput, errors, _ = search_load(bases[name], queries(args.requests, seed), c)
                    assert errors == 0, f"{errors} failed searches"
                    p50s.setdefault((name, c), []).append(stats.p50)
                    p95s.setdefault((name, c), []).append(stats.p95)
                    rps.setdefault((name, c), []).append(throughput)
                    print(f"[bench] round {r + 1} c={c} tracing {name}: p50 {stats.p50:.2f} p95 {stats.p95:.2f} ms, "
                          f"{throughput:.1f} req/s", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        sink.close()
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for c in (1, 8):
        for name in variants:
            key = (name, c)
            p50, p95, req_s = (float(np.median(v[key])) for v in (p50s, p95s, rps))
            base50 = float(np.median(p50s[("off", c)]))
            rows.append([str(c), name, f"{p50:.2f}", f"{p95:.2f}", f"{req_s:.1f}",
                         "1.000" if name == "off" else f"{p50 / base50:.3f}"])
    print(write_result("tracing", "Tracing cost on /v1/search", [
        f"- Two meshes side by side (embedding ORT int8 `{revision}`, retrieval on {args.docs:,} synthetic Korean "
        "documents, gateway), rounds alternating between them; every query text new (embedding + retrieval). "
        "The load generator shares the two cores.",
        f"- Tracing on: every span sampled and exported over OTLP/HTTP to a local receiver that decodes them "
        f"({sink.count:,} spans received). Medians of {args.rounds} rounds of {args.requests} requests.", "",
        md_table(["concurrency", "tracing", "p50 ms", "p95 ms", "req/s", "p50 on / off"], rows), ""], {
        "revision": revision, "docs": args.docs, "requests": args.requests, "rounds": args.rounds,
        "spans_received": sink.count,
        "p50_ms": {f"{k[0]}|c={k[1]}": v for k, v in p50s.items()},
        "p95_ms": {f"{k[0]}|c={k[1]}": v for k, v in p95s.items()},
        "req_per_s": {f"{k[0]}|c={k[1]}": v for k, v in rps.items()}}, out=args.out))


if __name__ == "__main__":
    main()
