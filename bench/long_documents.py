"""Long Korean documents: the analyser's time per character by length, and ingest through the gateway.

    python -m bench.long_documents [--docs 12] [--chars 20000]

Texts are built from the project's own Korean passages (bench/data/answers_ko.json and
paraphrase_ko.json), shuffled and joined until each reaches its length, so every length reads the
same kind of prose. Analysis: the service's analyser (Kiwi, default profile) on one text of each
length, whole (one analyser call, as before) and in pieces (what the service does now: pieces of
at most 1,000 characters cut at sentence ends), the median of 3 runs each, in microseconds per
character; the target is 20,000 characters within 1.5x of 2,000 per character. Ingest: ``--docs``
documents of ``--chars`` characters through the gateway's job route (docs/s, characters/s), then
the same documents straight into the retrieval service's bulk write, whose per-batch timings say
where the time goes (embedding, analysis, the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import ROOT, md_table, start_retrieval_pair, start_service, stop_service
from bench.report import write_result
from services.retrieval.korean.analyzer import KoreanAnalyzer, normalise
from services.runtime.models import current_model_dir

DATA = ROOT / "bench" / "data"
LENGTHS = (2_000, 5_000, 10_000, 20_000)


def prose(chars: int, seed: int) -> str:
    """Korean prose of exactly ``chars`` characters from the project's passages."""
    texts = [p["text"] for p in json.loads((DATA / "answers_ko.json").read_text())["passages"]]
    texts += [p["text"] for p in json.loads((DATA / "paraphrase_ko.json").read_text())["passages"]]
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        t = rng.choice(texts)
        out.append(t)
        size += len(t) + 1
    return " ".join(out)[:chars]


def analysis_rows() -> list[dict]:
    """µs per character, whole and in pieces, per length."""
    analyzer = KoreanAnalyzer()
    analyzer.terms(prose(500, 0))  # warm-up
    rows = []
    for n in LENGTHS:
        text = prose(n, n)
        got = {}
        for label, run in (("whole", lambda t=text: analyzer._piece_terms(normalise(t))),
                           ("pieces", lambda t=text: analyzer.terms(t))):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            got[label] = statistics.median(times) / n * 1e6
        rows.append({"chars": n, "whole_us_per_char": got["whole"], "pieces_us_per_char": got["pieces"]})
        print(f"[bench] {n} chars: whole {got['whole']:.1f} µs/char, pieces {got['pieces']:.1f} µs/char", flush=True)
    return rows


def ingest_rows(docs: int, chars: int) -> dict:
    """Gateway ingest throughput, and the retrieval service's own per-stage time for the same documents."""
    from clients import AsyncRetrievalClient
    from clients.retrieval import Document

    texts = [prose(chars, 100 + i) for i in range(docs)]
    model_dir = current_model_dir().resolve()
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-long-"))
    procs: list = []
    try:
        emb_port, ret_port = start_retrieval_pair(folder, model_dir, procs)
        gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target",
                                    f"127.0.0.1:{ret_port}")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=600) as http:
            http.post("/v1/collections", json={"name": "long", "fields": {}}).raise_for_status()
            t0 = time.perf_counter()
            job = http.post("/v1/collections/long/documents", json={"documents": [
                {"id": f"d{i}", "text": t} for i, t in enumerate(texts)]}).json()
            while (state := http.get(f"/v1/jobs/{job['id']}").json())["state"] not in ("succeeded", "failed"):
                time.sleep(0.2)
            gateway_s = time.perf_counter() - t0
            assert state["state"] == "succeeded", state
            http.post("/v1/collections", json={"name": "long2", "fields": {}}).raise_for_status()

        async def direct() -> tuple[float, dict[str, float]]:
            async with AsyncRetrievalClient(f"127.0.0.1:{ret_port}", timeout_s=600) as client:
                spent = {"embed_s": 0.0, "analyse_s": 0.0, "store_s": 0.0}
                t = time.perf_counter()
                stream = client.upsert_stream("long2", [[Document(f"d{i}", text)] for i, text in enumerate(texts)])
                async for event in stream:
                    timings = getattr(event, "timings", None)
                    if timings is not None:
                        spent["embed_s"] += timings.embed_ns / 1e9
                        spent["analyse_s"] += timings.tokenize_ns / 1e9
                        spent["store_s"] += timings.write_ns / 1e9
                return time.perf_counter() - t, spent

        direct_s, spent = asyncio.run(direct())
    finally:
        for p in procs:
            stop_service(p)
        shutil.rmtree(folder, ignore_errors=True)
    return {"docs": docs, "chars": chars, "gateway_s": gateway_s, "gateway_docs_per_s": docs / gateway_s,
            "gateway_chars_per_s": docs * chars / gateway_s, "direct_s": direct_s, **spent}


def main() -> None:
    """Measure and write bench/results/long_documents.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.long_documents", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rows = analysis_rows()
    ingest = ingest_rows(args.docs, args.chars)
    base = rows[0]
    last = rows[-1]
    ratio_pieces = last["pieces_us_per_char"] / base["pieces_us_per_char"]
    ratio_whole = last["whole_us_per_char"] / base["whole_us_per_char"]
    other = max(0.0, ingest["direct_s"] - ingest["embed_s"] - ingest["analyse_s"] - ingest["store_s"])
    body = [
        "- Texts: the project's own Korean passages (answers_ko.json, paraphrase_ko.json) shuffled and joined to "
        "each length; analyser Kiwi, default profile; median of 3 runs.",
        "",
        "## Analysis time per character",
        "",
        md_table(["characters", "whole text µs/char", "in pieces µs/char (the service)"],
                 [[f"{r['chars']:,}", f"{r['whole_us_per_char']:.1f}", f"{r['pieces_us_per_char']:.1f}"]
                  for r in rows]),
        "",
        f"20,000 / 2,000 characters per character: in pieces **{ratio_pieces:.2f}x** (target <= 1.5x: "
        f"{'met' if ratio_pieces <= 1.5 else 'missed'}); whole, as before, {ratio_whole:.2f}x.",
        "",
        "## Ingest of long documents",
        "",
        md_table(["path", "documents", "characters each", "seconds", "docs/s", "characters/s"], [
            ["gateway job", str(ingest["docs"]), f"{ingest['chars']:,}", f"{ingest['gateway_s']:.1f}",
             f"{ingest['gateway_docs_per_s']:.2f}", f"{ingest['gateway_chars_per_s']:,.0f}"],
            ["retrieval bulk write (direct)", str(ingest["docs"]), f"{ingest['chars']:,}",
             f"{ingest['direct_s']:.1f}", f"{ingest['docs'] / ingest['direct_s']:.2f}",
             f"{ingest['docs'] * ingest['chars'] / ingest['direct_s']:,.0f}"]]),
        "",
        f"Where the direct write's time goes (the service's per-batch timings): embedding {ingest['embed_s']:.1f} s, "
        f"Korean analysis {ingest['analyse_s']:.1f} s, the store {ingest['store_s']:.1f} s, the rest {other:.1f} s. "
        "A document is still one point: its dense vector covers its first 512 tokens (passage chunking is not built "
        "yet), so embedding a 20,000-character document costs what a 512-token one does.",
    ]
    print(write_result("long_documents", "Long documents", body, {"analysis": rows, "ingest": ingest,
                                                                   "ratio_pieces": ratio_pieces,
                                                                   "ratio_whole": ratio_whole}, out=args.out))


if __name__ == "__main__":
    main()
