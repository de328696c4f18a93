"""One worker process per service vs two on the same port (``--workers 2``, SO_REUSEPORT).

    .venv/bin/python -m bench.workers [--docs 10000] [--requests 200] [--ingest 300] [--rounds 2]

Two meshes run side by side as processes, rounds alternating between them: "1 worker" (embedding,
retrieval, gateway one process each) and "2 workers" (embedding and gateway with ``--workers 2``;
retrieval stays one process, as the embedded Qdrant engine's folder cannot be shared: several
retrieval workers need a Qdrant server). Measured: ``/v1/search`` at concurrency 8 with every query
text new (embedding + retrieval), and ingest through the gateway (short Korean passages, embedded
and written by one job).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from bench.common import md_table, start_search_mesh, stop_service
from bench.gateway import queries, search_load
from bench.report import write_result
from bench.retrieval import synthetic_catalog
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.runtime.models import current_model_dir

PASSAGE = "{n}번 상품: 가볍고 튼튼한 캠핑용 접이식 의자, 등받이 각도 조절과 수납 가방 포함, 선물용으로 좋아요"


def ingest(base: str, collection: str, n: int) -> float:
    """Create ``collection``, ingest ``n`` passages as one job; documents per second."""
    with httpx.Client(base_url=base, timeout=120) as http:
        assert http.post("/v1/collections", json={"name": collection}).status_code == 201
        docs = [{"id": f"d{i}", "text": PASSAGE.format(n=i)} for i in range(n)]
        start = time.perf_counter()
        job = http.post(f"/v1/collections/{collection}/documents", json={"documents": docs}).json()
        while True:
            state = http.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] in ("succeeded", "failed"):
                assert state["state"] == "succeeded", state
                return n / (time.perf_counter() - start)
            time.sleep(0.05)


def main() -> None:
    """Run both meshes, alternate rounds, write bench/results/workers.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=300, help="passages per ingest round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    model_dir = current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    root = Path(tempfile.mkdtemp(prefix="mesh-bench-workers-"))
    procs: list = []
    search: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    ingest_rate: dict[int, list[float]] = {1: [], 2: []}
    try:
        synthetic_catalog(root / "w1", args.docs, revision, KoreanAnalyzer(), "edge")
        shutil.copytree(root / "w1", root / "w2")
        bases = {w: start_search_mesh(root / f"w{w}", model_dir, procs, workers=w) for w in (1, 2)}
        for w, base in bases.items():
            search_load(base, queries(40, 50 + w), 4)  # warm-up, excluded
        seed = 5000
        for r in range(args.rounds):
            for w in ((1, 2) if r % 2 == 0 else (2, 1)):
                seed += 1
                stats, rps, errors, _ = search_load(bases[w], queries(args.requests, seed), 8)
                assert errors == 0
                search[w].append((stats.p50, stats.p95, rps))
                ingest_rate[w].append(ingest(bases[w], f"ingest{r}", args.ingest))
                print(f"[bench] round {r + 1}, {w} worker(s): search c=8 p50 {stats.p50:.1f} ms, {rps:.1f} req/s; "
                      f"ingest {ingest_rate[w][-1]:.1f} docs/s", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        shutil.rmtree(root, ignore_errors=True)
    med = {w: [float(np.median([row[i] for row in search[w]])) for i in range(3)] for w in (1, 2)}
    ing = {w: float(np.median(ingest_rate[w])) for w in (1, 2)}
    rows = [[f"{w}", f"{med[w][0]:.1f}", f"{med[w][1]:.1f}", f"{med[w][2]:.1f}", f"{ing[w]:.1f}"] for w in (1, 2)]
    rows.append(["2 / 1", f"{med[2][0] / med[1][0]:.2f}", f"{med[2][1] / med[1][1]:.2f}",
                 f"{med[2][2] / med[1][2]:.2f}", f"{ing[2] / ing[1]:.2f}"])
    print(write_result("workers", "Worker processes per service: 1 vs 2", [
        f"- Two meshes side by side, rounds alternating: embedding (ORT int8 `{revision}`) and gateway with 1 or 2 "
        f"worker processes on one port; retrieval one process on {args.docs:,} synthetic Korean documents (the "
        "embedded Qdrant engine cannot be shared; several retrieval workers need a Qdrant server). The load "
        "generator shares the cores.",
        f"- Search: concurrency 8, {args.requests} new query texts per round; ingest: {args.ingest} short Korean "
        f"passages per round through `POST /v1/collections/{{name}}/documents`. Medians of {args.rounds} rounds.", "",
        md_table(["workers per service", "search p50 ms", "search p95 ms", "search req/s", "ingest docs/s"], rows),
        ""], {"revision": revision, "search": search, "ingest_docs_per_s": ingest_rate}, out=args.out))


if __name__ == "__main__":
    main()
