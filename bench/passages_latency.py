"""Search latency on 10k short documents: the passage layout against the code before passages, side by side.

    python -m bench.passages_latency [--docs 10000] [--queries 200] [--baseline REV]

One synthetic catalog of short Korean product documents (bench/retrieval.py's ``synthetic_catalog``,
one passage each) is written twice: in the ``document`` layout (as every catalog before passages)
and in the ``passages`` layout (the default now). Three retrieval services run as processes: the
code at ``--baseline`` (default: the last commit before passages, checked out into a temporary
worktree) over a copy of the document-layout folder, and this checkout over each folder. The same
searches (query vectors given, so embedding is excluded, as bench/retrieval.py measures) go to the
three in turn, query by query, so drift on the machine hits all three alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT, LatencyStats, md_table, start_service, stop_service
from bench.report import write_result
from bench.retrieval import SEARCH_MODES, embed_cached, synthetic_catalog
from clients.retrieval import AsyncRetrievalClient, QueryVector
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.runtime.models import current_model_dir
from services.runtime.processes import start_process

BASELINE = "d6ff6ba"  # main before passages


def baseline_tree(rev: str, where: Path) -> Path:
    """A worktree of ``rev`` with its generated protos (its own code, not this checkout's)."""
    subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT, check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "scripts/gen_protos.py"], cwd=where, check=True, capture_output=True)
    return where


async def timed(targets: dict[str, str], qvecs: np.ndarray, texts: list[str], revision: str,
                queries: int) -> dict[str, dict[str, LatencyStats]]:
    """Per target and mode, 10 warm-up then ``queries`` timed searches, the targets taking turns."""
    clients = {name: AsyncRetrievalClient(t, timeout_s=30) for name, t in targets.items()}
    out: dict[str, dict[str, LatencyStats]] = {name: {} for name in targets}
    try:
        for label, mode in SEARCH_MODES.items():
            samples: dict[str, list[float]] = {name: [] for name in targets}
            for i in range(queries + 10):
                vector = QueryVector(qvecs[i % len(texts)].tolist(), revision)
                for name, client in clients.items():
                    t = time.perf_counter()
                    await client.search("bench", texts[i % len(texts)], top_k=10, mode=mode, vector=vector)
                    if i >= 10:
                        samples[name].append(time.perf_counter() - t)
            for name in targets:
                out[name][label.split(" ")[0]] = LatencyStats.of(samples[name])
            print("[bench] " + label + ": " + ", ".join(f"{n} p50 {out[n][label.split(' ')[0]].p50:.2f} ms"
                                                        for n in targets), flush=True)
    finally:
        for c in clients.values():
            await c.close()
    return out


def main() -> None:
    """Build the two catalogs, start the three services, time the searches, write the result."""
    from bench.embedding import QUERIES

    parser = argparse.ArgumentParser(prog="python -m bench.passages_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline", default=BASELINE, help="the revision measured as 'before passages'")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    model_dir = current_model_dir()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-passages-latency-"))
    procs = []
    tree = tmp / "baseline"
    try:
        analyzer = KoreanAnalyzer()
        doc_folder, pass_folder, old_folder = tmp / "document", tmp / "passages", tmp / "old"
        synthetic_catalog(doc_folder, args.docs, revision, analyzer, "edge")
        synthetic_catalog(pass_folder, args.docs, revision, analyzer, "edge", layout="passages:400/100")
        shutil.copytree(doc_folder, old_folder)
        baseline_tree(args.baseline, tree)
        targets = {}
        proc, port = start_process("services.retrieval", "--port", "0", "--log-level", "WARNING",
                                   "--qdrant-location", str(old_folder), timeout_s=600, cwd=tree,
                                   env={"PYTHONPATH": f"{tree}:{tree / 'gen' / 'python'}"})
        procs.append(proc)
        targets[f"before passages ({args.baseline})"] = f"127.0.0.1:{port}"
        for name, folder in (("document layout, this code", doc_folder), ("passages layout, this code", pass_folder)):
            proc, port = start_service("services.retrieval", "--qdrant-location", str(folder), timeout_s=600)
            procs.append(proc)
            targets[name] = f"127.0.0.1:{port}"
        qvecs = embed_cached(QUERIES, True, model_dir, revision)
        stats = asyncio.run(timed(targets, qvecs, QUERIES, revision, args.queries))
    finally:
        for p in procs:
            stop_service(p)
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    base_name = next(iter(stats))
    rows, figures = [], {}
    for name, by_mode in stats.items():
        for mode, st in by_mode.items():
            ratio = st.p50 / stats[base_name][mode].p50
            rows.append([name, mode, f"{st.p50:.2f}", f"{st.p95:.2f}", f"{ratio:.2f}x"])
            figures[f"{name}/{mode}"] = {"p50_ms": st.p50, "p95_ms": st.p95, "ratio_p50": ratio}
    body = [
        f"- {args.docs:,} synthetic short Korean documents (one passage each), query vectors given, top 10, "
        f"{args.queries} timed searches per mode and service after 10 warm-up, the services taking turns query by "
        "query; Qdrant Edge on disk; one retrieval process each.",
        "",
        md_table(["service", "mode", "p50 ms", "p95 ms", "p50 vs before passages"], rows),
        "",
        "Target: search p50 on 10k short documents within 1.2x of before passages.",
    ]
    print(write_result("passages_latency", "Search latency with passages", body, {"rows": figures,
                                                                                   "docs": args.docs}, out=args.out))


if __name__ == "__main__":
    main()
