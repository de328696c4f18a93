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


LAYOUTS = {"document": "0", "passages": ""}  # MESH_RETRIEVAL_PASSAGE_CHARS: 0 = one point per document; "" = default


def ingest_rows(docs: int, chars: int, layout: str = "passages") -> dict:
    """Gateway ingest throughput, and the retrieval service's own per-stage time for the same documents."""
    from clients import AsyncRetrievalClient
    from clients.retrieval import Document

    texts = [prose(chars, 100 + i) for i in range(docs)]
    model_dir = current_model_dir().resolve()
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-long-"))
    procs: list = []
    try:
        env = {"MESH_RETRIEVAL_PASSAGE_CHARS": LAYOUTS[layout]} if LAYOUTS[layout] else None
        emb_port, ret_port = start_retrieval_pair(folder, model_dir, procs, env=env)
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
            info = http.get("/v1/collections/long").json()
            http.post("/v1/collections", json={"name": "long2", "fields": {}}).raise_for_status()
        index_bytes = sum(f.stat().st_blocks * 512 for f in (folder / "collections" / info["collection"]).rglob("*")
                          if f.is_file())  # allocated blocks: the engine preallocates sparse segment files

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
    return {"layout": info.get("layout"), "docs": docs, "chars": chars, "gateway_s": gateway_s,
            "gateway_docs_per_s": docs / gateway_s, "gateway_chars_per_s": docs * chars / gateway_s,
            "direct_s": direct_s, "index_bytes": index_bytes, "index_kb_per_doc": index_bytes / docs / 1e3, **spent}


def main() -> None:
    """Measure and write bench/results/long_documents.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.long_documents", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--layouts", default="document,passages",
                        help="collection layouts ingested side by side in this run (document: one point each)")
    parser.add_argument("--skip-analysis", action="store_true", help="only the ingest rows")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rows = [] if args.skip_analysis else analysis_rows()
    ingests = [ingest_rows(args.docs, args.chars, layout) for layout in args.layouts.split(",")]
    body = [
        "- Texts: the project's own Korean passages (answers_ko.json, paraphrase_ko.json) shuffled and joined to "
        "each length; analyser Kiwi, default profile; median of 3 runs.",
        "",
    ]
    figures: dict = {"ingest": ingests}
    if rows:
        base, last = rows[0], rows[-1]
        ratio_pieces = last["pieces_us_per_char"] / base["pieces_us_per_char"]
        ratio_whole = last["whole_us_per_char"] / base["whole_us_per_char"]
        figures.update({"analysis": rows, "ratio_pieces": ratio_pieces, "ratio_whole": ratio_whole})
        body += [
            "## Analysis time per character",
            "",
            md_table(["characters", "whole text µs/char", "in pieces µs/char (the service)"],
                     [[f"{r['chars']:,}", f"{r['whole_us_per_char']:.1f}", f"{r['pieces_us_per_char']:.1f}"]
                      for r in rows]),
            "",
            f"20,000 / 2,000 characters per character: in pieces **{ratio_pieces:.2f}x** (target <= 1.5x: "
            f"{'met' if ratio_pieces <= 1.5 else 'missed'}); whole, as before, {ratio_whole:.2f}x.",
            "",
        ]
    table = []
    for g in ingests:
        table += [[g["layout"], "gateway job", str(g["docs"]), f"{g['chars']:,}", f"{g['gateway_s']:.1f}",
                   f"{g['gateway_docs_per_s']:.2f}", f"{g['gateway_chars_per_s']:,.0f}",
                   f"{g['index_kb_per_doc']:,.0f}"],
                  [g["layout"], "retrieval bulk write (direct)", str(g["docs"]), f"{g['chars']:,}",
                   f"{g['direct_s']:.1f}", f"{g['docs'] / g['direct_s']:.2f}",
                   f"{g['docs'] * g['chars'] / g['direct_s']:,.0f}", ""]]
    body += [
        "## Ingest of long documents, by collection layout (side by side in this run)",
        "",
        md_table(["layout", "path", "documents", "characters each", "seconds", "docs/s", "characters/s",
                  "index KB per document"], table),
        "",
        "Where each direct write's time goes (the service's per-batch timings): " + "; ".join(
            f"{g['layout']}: embedding {g['embed_s']:.1f} s, Korean analysis {g['analyse_s']:.1f} s, the store "
            f"{g['store_s']:.1f} s, the rest "
            f"{max(0.0, g['direct_s'] - g['embed_s'] - g['analyse_s'] - g['store_s']):.1f} s" for g in ingests) + ".",
        "",
        "In the `document` layout (collections written before passages) a document is one point whose dense "
        "vector covers its first 512 tokens, so embedding a 20,000-character document costs what a 512-token one "
        "does; in the `passages` layout every passage is embedded, the whole text (plus the overlap) is.",
    ]
    print(write_result("long_documents", "Long documents", body, figures, out=args.out))


if __name__ == "__main__":
    main()
