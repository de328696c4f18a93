"""Several queries at once: latency against one query, and recall of the merged list against each query.

    python -m bench.multi_query [--set bench/data/multi_query_ko.json] [--rounds 3]

The mesh runs as processes (embedding int8, retrieval on Qdrant Edge holding the passages of
``paraphrase_ko.json``, two gateways with their own in-process caches). Each information need of
``multi_query_ko.json`` is asked four ways; the bench searches each way alone (gateway A) and all
four as ``queries`` (gateway B), one request at a time, both cold: every text is new to the gateway
that embeds it (a round suffixes the texts with its own marker, so nothing comes from a cache).
Latency: the median of the 4-query requests over the median of the single-query ones, measured
in the same rounds (interleaved need by need). Recall@10 of the merged list is set against each
way's own recall@10 over all needs (the target: not below the best single way). Nothing here is
tuned: the merge is RRF across queries with k = 60, the usual constant.
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

from bench.common import ROOT, md_table, start_retrieval_pair, start_service, stop_service
from bench.report import write_result
from services.runtime.models import current_model_dir

DATA = ROOT / "bench" / "data"


def ingest(base: str, passages: list[dict]) -> None:
    """Collection "mq" holding the passages, through the gateway's job route."""
    with httpx.Client(base_url=base, timeout=120) as http:
        http.post("/v1/collections", json={"name": "mq", "fields": {}}).raise_for_status()
        job = http.post("/v1/collections/mq/documents", json={"documents": [
            {"id": p["id"], "text": p["text"]} for p in passages]}).json()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            state = http.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] in ("succeeded", "failed", "cancelled"):
                assert state["state"] == "succeeded", state
                return
            time.sleep(0.5)
        raise TimeoutError("ingest did not finish")


def search(http: httpx.Client, body: dict) -> tuple[float, list[str]]:
    """One search: its latency in ms and the hit ids."""
    t = time.perf_counter()
    r = http.post("/v1/search", json={"collection": "mq", "top_k": 10, **body})
    ms = (time.perf_counter() - t) * 1e3
    r.raise_for_status()
    return ms, [h["id"] for h in r.json()["hits"]]


def recall(ids: list[str], relevant: list[str]) -> float:
    """Share of the relevant passages among ``ids``."""
    return len(set(ids) & set(relevant)) / len(relevant)


def embedding_floor(model_dir: Path, needs: list[dict]) -> tuple[float, float]:
    """In-process ORT int8 p50 ms of one need's first query alone and of its four at once (no service, no gateway)."""
    from services.embedding.engine.onnx import OnnxRuntimeEngine
    from services.embedding.engine.tokenizer import E5Tokenizer, TokenBatch

    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    engine = OnnxRuntimeEngine(model_dir, "int8")
    engine.warm_up()
    one: list[float] = []
    four: list[float] = []
    try:
        for need in needs:
            texts = ["query: " + q for q in need["queries"]]
            for batch, into in ((texts[:1], one), (texts, four)):
                t = time.perf_counter()
                engine.encode_core(TokenBatch.pad(tok.encode(batch, True)))
                into.append((time.perf_counter() - t) * 1e3)
    finally:
        engine.close()
    return statistics.median(one), statistics.median(four)


def main() -> None:
    """Start the mesh, measure, write bench/results/multi_query.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.multi_query", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=DATA / "multi_query_ko.json")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (recall is read in round 1)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    needs = json.loads(args.set.read_text())["needs"]
    passages = json.loads((DATA / "paraphrase_ko.json").read_text())["passages"]
    model_dir = current_model_dir().resolve()
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-mq-"))
    procs: list = []
    single_ms: list[float] = []
    multi_ms: list[float] = []
    ways = len(needs[0]["queries"])
    single_recall = [[0.0] * len(needs) for _ in range(ways)]
    merged_recall = [0.0] * len(needs)
    try:
        emb_port, ret_port = start_retrieval_pair(folder, model_dir, procs)
        bases = []
        for _ in range(2):
            gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}",
                                        "--retrieval-target", f"127.0.0.1:{ret_port}", "--default-timeout-ms", "10000")
            procs.append(gw)
            bases.append(f"http://127.0.0.1:{gw_port}")
        ingest(bases[0], passages)
        with httpx.Client(base_url=bases[0], timeout=30) as one, httpx.Client(base_url=bases[1], timeout=30) as many:
            for client in (one, many):  # warm-up: connections, first calls (excluded)
                for i in range(5):
                    search(client, {"queries": [f"준비 {i} 가", f"준비 {i} 나"]} if client is many
                           else {"query": f"준비 {i}"})
            for r in range(args.rounds):
                for n, need in enumerate(needs):
                    texts = need["queries"] if r == 0 else [f"{q} ({r})" for q in need["queries"]]
                    ms, ids = search(many, {"queries": texts})
                    multi_ms.append(ms)
                    if r == 0:
                        merged_recall[n] = recall(ids, need["relevant"])
                    for w, text in enumerate(texts):
                        ms, ids = search(one, {"query": text})
                        single_ms.append(ms)
                        if r == 0:
                            single_recall[w][n] = recall(ids, need["relevant"])
                print(f"[bench] round {r + 1}/{args.rounds}: 4 queries p50 {statistics.median(multi_ms):.1f} ms, "
                      f"one query p50 {statistics.median(single_ms):.1f} ms", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        shutil.rmtree(folder, ignore_errors=True)
    floor = embedding_floor(model_dir, needs)
    report(args, needs, single_ms, multi_ms, single_recall, merged_recall, floor)


def report(args: argparse.Namespace, needs: list[dict], single_ms: list[float], multi_ms: list[float],
           single_recall: list[list[float]], merged_recall: list[float], floor: tuple[float, float]) -> None:
    """Write the tables and the two targets."""
    s50, m50 = statistics.median(single_ms), statistics.median(multi_ms)
    ratio = m50 / s50
    way_names = ["original paraphrase", "keyword-style", "natural question", "indirect"]
    per_way = [sum(v) / len(v) for v in single_recall]
    merged = sum(merged_recall) / len(merged_recall)
    best = max(per_way)
    rows = [[way_names[w] if w < len(way_names) else f"way {w + 1}", f"{per_way[w]:.3f}"] for w in range(len(per_way))]
    rows.append(["**all four merged (`queries`)**", f"**{merged:.3f}**"])
    body = [
        f"- Set: `{args.set.name}`, {len(needs)} needs x {len(single_recall)} ways, over the "
        "281 passages of `paraphrase_ko.json` (the set the queries were written for; nothing tuned on it).",
        "- Latency: c=1, cold cache (every text new to the gateway that embeds it), gateway A one query per request, "
        f"gateway B the four as `queries`, interleaved need by need, {args.rounds} rounds.",
        "",
        "## Latency",
        "",
        md_table(["request", "requests", "p50 ms", "p95 ms"], [
            ["one query", str(len(single_ms)), f"{s50:.1f}", f"{sorted(single_ms)[int(0.95 * len(single_ms))]:.1f}"],
            ["four queries", str(len(multi_ms)), f"{m50:.1f}", f"{sorted(multi_ms)[int(0.95 * len(multi_ms))]:.1f}"]]),
        "",
        f"Four queries / one query at p50: **{ratio:.2f}x** (target <= 1.6x: {'met' if ratio <= 1.6 else 'missed'}).",
        "",
        f"The floor under it, in process (ORT int8, no service, no gateway, the same texts): embedding one query "
        f"{floor[0]:.1f} ms, the four at once {floor[1]:.1f} ms (**{floor[1] / floor[0]:.2f}x**). On two cores the "
        "encoder is compute-bound, so a batch costs about its tokens: one Embed call saves the per-call overhead, "
        "not the model's work, and no gateway change reaches 1.6x here. On a GPU (Triton) a batch of four costs "
        "about one; that is where the target can hold.",
        "",
        "## Recall@10",
        "",
        md_table(["queries", "recall@10"], rows),
        "",
        f"Merged {merged:.3f} against the best single way {best:.3f} "
        f"(target: merged >= best single: {'met' if merged >= best else 'missed'}).",
    ]
    text = write_result("multi_query", "Several queries at once", body, {
        "single_ms": single_ms, "multi_ms": multi_ms, "p50_single_ms": s50, "p50_multi_ms": m50, "ratio": ratio,
        "recall_per_way": per_way, "recall_merged": merged, "needs": len(needs),
        "embedding_floor_ms": {"one": floor[0], "four": floor[1]}}, out=args.out)
    print(text)


if __name__ == "__main__":
    main()
