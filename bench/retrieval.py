"""Retrieval bench: quality, search latency at scale, and ingest with its time split.

Quality on autorag-ko for every leg, analyser and fusion; search latency at 10k and 100k documents
through gRPC; end-to-end ingest.

    python -m bench.retrieval --data ../shared/data [--sizes 10000 100000] [--out bench/results]

Quality runs in process (the service's own analyser, BM25, Qdrant local mode and hybrid searcher;
dense vectors from the int8 model, cached under ~/.cache/korean-mesh/bench). Speed runs the real
retrieval service as a process over a persistent local-mode collection filled with synthetic Korean
distractors (query vector given, so embedding is excluded, as the target says).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import LatencyStats, md_table, start_service, stop_service
from bench.report import write_result
from clients.retrieval import AsyncRetrievalClient, BatchWritten, Document, Mode, QueryVector
from services.embedding.batcher import encode_grouped
from services.embedding.engine.onnx import OnnxRuntimeEngine
from services.embedding.engine.tokenizer import E5Tokenizer
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.korean.analyzer import KoreanAnalyzer, normalise
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.query import SearchQuery
from services.retrieval.store import StoredPoint, open_store
from services.runtime.models import current_model_dir

CACHE = Path.home() / ".cache" / "korean-mesh" / "bench"


class WhitespaceAnalyzer:
    """Baseline: lower-cased whitespace tokens with punctuation stripped (particles stay attached)."""

    label = "whitespace"

    def terms(self, text: str) -> list[str]:
        return [t for t in re.split(r"[\s\W]+", normalise(text)) if t]


def load_gold(data: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(doc_id, text) pages and (query, relevant doc_id) questions of autorag-ko."""
    import pyarrow.parquet as pq

    corpus = pq.read_table(data / "autorag-ko" / "ocr_corpus_v3.parquet").to_pylist()
    qa = pq.read_table(data / "autorag-ko" / "qa_v4.parquet").to_pylist()
    docs = [(r["doc_id"], r["contents"]) for r in corpus]
    questions = [(r["query"], r["retrieval_gt"][0][0]) for r in qa]
    return docs, questions


def embed_cached(texts: list[str], query: bool, model_dir: Path, revision: str) -> np.ndarray:
    """int8 vectors of texts, cached by revision and content."""
    key = hashlib.sha256((revision + str(query) + "\x00".join(texts)).encode()).hexdigest()[:16]
    path = CACHE / f"{key}.npy"
    if path.exists():
        return np.load(path)
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    engine = OnnxRuntimeEngine(model_dir, "int8")
    out = []
    for i in range(0, len(texts), 16):
        out.append(encode_grouped(engine, tok.encode(texts[i:i + 16], query)))
        print(f"[bench] embedded {min(len(texts), i + 16)}/{len(texts)} {'queries' if query else 'pages'}",
              end="\r", flush=True)
    print()
    vecs = np.concatenate(out)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def build_catalog(analyzer, docs: list[tuple[str, str]], vecs: np.ndarray, revision: str,
                  engine: str = "edge"):
    """A fresh in-memory catalog of the gold corpus, sparse vectors from ``analyzer``."""
    store = open_store(":memory:", engine)
    terms = [analyzer.terms(text) for _, text in docs]
    avg = float(np.mean([max(1, len(t)) for t in terms]))
    meta = store.create_catalog("gold", {}, revision, getattr(analyzer, "label", "x"), vecs.shape[1], avg)
    bm = Bm25(avg_doc_len=avg)
    points = []
    for (doc_id, text), vec, toks in zip(docs, vecs, terms, strict=True):
        sp = bm.document(toks)
        points.append(StoredPoint(doc_id, text, {}, vec.tolist(), sp.indices, sp.values))
    for i in range(0, len(points), 256):
        store.upsert(meta.collection, points[i:i + 256])
    return store, meta.collection


def metrics(ranked: list[list[str]], gold: list[str]) -> dict[str, float]:
    """recall@10, MRR@10, nDCG@10 and hit@1 for one relevant document per question."""
    r10 = mrr = ndcg = hit1 = 0.0
    for ids, want in zip(ranked, gold, strict=True):
        if want in ids[:10]:
            rank = ids.index(want) + 1
            r10 += 1
            mrr += 1 / rank
            ndcg += 1 / math.log2(rank + 1)
            hit1 += rank == 1
    n = len(gold)
    return {"recall@10": r10 / n, "mrr@10": mrr / n, "ndcg@10": ndcg / n, "hit@1": hit1 / n}


def quality(data: Path, model_dir: Path, revision: str) -> list[list[str]]:
    """Rows of the quality table: every analyser for keyword, dense, and hybrid fusions."""
    docs, questions = load_gold(data)
    doc_vecs = embed_cached([t for _, t in docs], False, model_dir, revision)
    q_vecs = embed_cached([q for q, _ in questions], True, model_dir, revision)
    gold = [g for _, g in questions]
    analyzers: list[Any] = [WhitespaceAnalyzer(), KoreanAnalyzer("nouns", "kiwi"),
                            KoreanAnalyzer("nouns+predicates", "kiwi"), KoreanAnalyzer("content", "kiwi"),
                            KoreanAnalyzer("nouns+predicates", "mecab")]
    rows = []
    dense_done = False
    for analyzer in analyzers:
        label = analyzer.label if isinstance(analyzer, WhitespaceAnalyzer) else analyzer.info.label()
        t = time.perf_counter()
        store, collection = build_catalog(analyzer, docs, doc_vecs, revision)
        per_doc_ms = (time.perf_counter() - t) / len(docs) * 1e3
        searcher = HybridSearcher(store)
        variants: list[tuple[str, str, dict]] = [("keyword", "keyword", {})]
        if not dense_done:
            variants.append(("dense", "dense", {}))
            dense_done = True
        variants += [("hybrid RRF k=60", "hybrid", {"fusion": "rrf", "rrf_k": 60}),
                     ("hybrid RRF k=10", "hybrid", {"fusion": "rrf", "rrf_k": 10}),
                     ("hybrid DBSF", "hybrid", {"fusion": "dbsf"}),
                     ("hybrid weighted 0.2 (default)", "hybrid", {"fusion": "weighted", "dense_weight": 0.2}),
                     ("hybrid weighted 0.3", "hybrid", {"fusion": "weighted", "dense_weight": 0.3}),
                     ("hybrid weighted 0.5", "hybrid", {"fusion": "weighted", "dense_weight": 0.5})]
        for name, mode, params in variants:
            ranked = []
            for (qtext, _), qvec in zip(questions, q_vecs, strict=True):
                q = SearchQuery(text=qtext, top_k=10, mode=mode, **params)
                sparse = Bm25.query(analyzer.terms(qtext))
                hits = searcher.search(collection, q, mode, qvec.tolist(), sparse)
                ranked.append([h.doc_id for h in hits])
            m = metrics(ranked, gold)
            leg = "—" if mode == "dense" else label
            rows.append([name, leg, *(f"{m[k]:.3f}" for k in ("recall@10", "mrr@10", "ndcg@10", "hit@1")),
                         f"{per_doc_ms:.2f}" if mode != "dense" else "—"])
            print(f"[bench] {name:22s} {leg:38s} " + " ".join(f"{k}={v:.3f}" for k, v in m.items()), flush=True)
        store.close()
    return rows


def synthetic_catalog(path: Path, n: int, revision: str, analyzer: KoreanAnalyzer, engine: str,
                      seed: int = 7, layout: str = "document") -> None:
    """Fill a catalog with ``n`` synthetic short Korean product documents (random unit vectors), one point each."""
    rng = random.Random(seed)
    nouns = ("소설 에세이 여행 가이드 요리 레시피 개발자 면접 파이썬 데이터 분석 선물 향수 "
             "텀블러 이어폰 노트북 가방 캠핑 의자 동화 그림책 역사 경제 주식 투자 건강 운동 "
             "러닝화 커피 원두 차 화장품 스킨 로션 시계 지갑 우산 겨울 여름 봄").split()
    adjectives = ["가벼운", "튼튼한", "따뜻한", "시원한", "작은", "큰", "예쁜", "편한", "새로운", "인기"]
    store = open_store(str(path), engine)
    meta = store.create_catalog("bench", {"category": "keyword", "price": "integer"}, revision,
                                analyzer.info.label(), 384, 12.0, layout)
    bm = Bm25(avg_doc_len=12.0)
    nprng = np.random.default_rng(seed)
    batch: list[StoredPoint] = []
    for i in range(n):
        words = [rng.choice(adjectives)] + rng.sample(nouns, 4) + [str(rng.randint(1, 2025))]
        terms = [w for w in words if w not in adjectives] + ["가볍", "튼튼"][: rng.randint(0, 2)]
        vec = nprng.standard_normal(384).astype(np.float32)
        vec /= np.linalg.norm(vec)
        sp = bm.document(terms)
        batch.append(StoredPoint(f"syn-{i}", " ".join(words), {"category": rng.choice(nouns[:10]),
                                                                 "price": rng.randint(1000, 90000)},
                                 vec.tolist(), sp.indices, sp.values))
        if len(batch) == 1000:
            store.upsert(meta.collection, batch)
            batch = []
            print(f"[bench] synthetic {i + 1}/{n}", end="\r", flush=True)
    if batch:
        store.upsert(meta.collection, batch)
    if hasattr(store, "optimize"):
        store.optimize(meta.collection)
    print()
    store.close()


SEARCH_MODES: dict[str, Mode] = {"hybrid (default fusion: weighted 0.2)": "hybrid", "dense": "dense",
                                  "keyword": "keyword"}


async def timed_searches(target: str, qvecs: np.ndarray, revision: str, queries: int) -> dict[str, LatencyStats]:
    """Per mode, 10 warm-up then ``queries`` timed searches one at a time through the typed client."""
    from bench.embedding import QUERIES

    out = {}
    async with AsyncRetrievalClient(target, timeout_s=30) as client:
        for name, mode in SEARCH_MODES.items():
            samples = []
            for i in range(queries + 10):
                vector = QueryVector(qvecs[i % len(QUERIES)].tolist(), revision)
                t = time.perf_counter()
                await client.search("bench", QUERIES[i % len(QUERIES)], top_k=10, mode=mode, vector=vector)
                if i >= 10:
                    samples.append(time.perf_counter() - t)
            out[name] = LatencyStats.of(samples)
            print(f"[bench] {name}: p50 {out[name].p50:.1f} ms p95 {out[name].p95:.1f} ms", flush=True)
    return out


def search_latency(path: Path, model_dir: Path, revision: str, queries: int, engine: str) -> dict[str, LatencyStats]:
    """Search p50/p95 through gRPC on a catalog folder, per mode, query vectors given."""
    from bench.embedding import QUERIES

    qvecs = embed_cached(QUERIES, True, model_dir, revision)
    proc, port = start_service("services.retrieval", "--qdrant-location", str(path), "--qdrant-engine", engine,
                               timeout_s=600)
    try:
        return asyncio.run(timed_searches(f"127.0.0.1:{port}", qvecs, revision, queries))
    finally:
        stop_service(proc)


async def stream_ingest(target: str, texts: list[str]) -> tuple[dict[str, int], float]:
    """Texts through UpsertDocumentsStream in batches of 64: the service's time split (ns) and the wall time."""
    async with AsyncRetrievalClient(target, timeout_s=30) as client:
        await client.create_collection("ingest", {})
        batches = ([Document(f"d{i + j}", t) for j, t in enumerate(texts[i:i + 64])]
                   for i in range(0, len(texts), 64))
        split = {"embed": 0, "tokenize": 0, "write": 0}
        t = time.perf_counter()
        async for event in client.upsert_stream("ingest", batches, timeout_s=3600):
            if isinstance(event, BatchWritten) and event.timings is not None:
                split["embed"] += event.timings.embed_ns
                split["tokenize"] += event.timings.tokenize_ns
                split["write"] += event.timings.write_ns
        return split, time.perf_counter() - t


def ingest(data: Path, model_dir: Path, n_docs: int) -> dict[str, float]:
    """Docs/s through UpsertDocumentsStream (embedding service + retrieval service), with the split."""
    pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text())
    texts = [p["sentence1"] for p in pairs] + [p["sentence2"] for p in pairs]
    texts = (texts * (n_docs // len(texts) + 1))[:n_docs]
    emb, emb_port = start_service("services.embedding", "--model-dir", str(model_dir))
    ret, port = start_service("services.retrieval", "--qdrant-location", ":memory:", "--embedding-target",
                              f"127.0.0.1:{emb_port}")
    try:
        split, wall = asyncio.run(stream_ingest(f"127.0.0.1:{port}", texts))
    finally:
        stop_service(ret)
        stop_service(emb)
    total = sum(split.values())
    return {"docs": n_docs, "docs_per_s": n_docs / wall, **{k: v / total for k, v in split.items()}}


def ingest_split(data: Path, model_dir: Path, revision: str, n_docs: int = 256,
                 batch: int = 64) -> list[dict[str, Any]]:
    """Where one ingest batch's time goes on the retrieval side, in process, short vs ~800-character passages.

    Stages per batch as the service runs them: embedding (int8, in process here: the embedding
    service's share), Korean analysis, BM25 vectors, the Qdrant Edge write. Then the same batches
    with the analysis on its own thread while the batch is embedded (what the service could do, since
    the embedding happens in another process), measured, not computed.
    """
    import threading

    import pyarrow.parquet as pq

    pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text())
    short = [p["sentence1"] for p in pairs][:n_docs]
    pages = pq.read_table(data / "autorag-ko" / "ocr_corpus_v3.parquet").to_pylist()
    long = [r["contents"][:800] for r in pages if len(r["contents"]) >= 800][:n_docs // 2]  # bounded: slow to embed
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    engine = OnnxRuntimeEngine(model_dir, "int8")
    analyzer = KoreanAnalyzer()
    analyzer.terms_batch(short[:8] + long[:8])  # warm both before any timing
    encode_grouped(engine, tok.encode(short[:8] + long[:8], False))
    out = []
    for label, texts in (("short (KLUE-STS sentences)", short), ("~800 characters (autorag-ko pages, cut)", long)):
        for overlap in (False, True):
            store = open_store(":memory:", "edge")
            meta = store.create_catalog("ingest", {}, revision, analyzer.info.label(), 384, 64.0)
            split = {"embed": 0.0, "analysis": 0.0, "bm25": 0.0, "write": 0.0}
            start = time.perf_counter()
            for i in range(0, len(texts), batch):
                chunk = texts[i:i + batch]
                t0 = time.perf_counter()
                if overlap:
                    box: dict[str, Any] = {}
                    worker = threading.Thread(target=lambda c=chunk, b=box: b.update(terms=analyzer.terms_batch(c)))
                    worker.start()
                    vecs = encode_grouped(engine, tok.encode(chunk, False))
                    t1 = time.perf_counter()
                    worker.join()
                    terms = box["terms"]
                else:
                    vecs = encode_grouped(engine, tok.encode(chunk, False))
                    t1 = time.perf_counter()
                    terms = analyzer.terms_batch(chunk)
                t2 = time.perf_counter()
                bm = Bm25(avg_doc_len=float(np.mean([max(1, len(t)) for t in terms])))
                points = []
                for j, (text, vec, toks) in enumerate(zip(chunk, vecs, terms, strict=True)):
                    sp = bm.document(toks)
                    points.append(StoredPoint(f"d{i + j}", text, {}, vec.tolist(), sp.indices, sp.values))
                t3 = time.perf_counter()
                store.upsert(meta.collection, points)
                t4 = time.perf_counter()
                split["embed"] += t1 - t0
                split["analysis"] += t2 - t1  # with overlap: only what the analysis adds after embedding ends
                split["bm25"] += t3 - t2
                split["write"] += t4 - t3
            wall = time.perf_counter() - start
            store.close()
            row = {"passages": label, "analysis": "overlapped with embedding" if overlap else "after embedding",
                   "docs": len(texts), "docs_per_s": len(texts) / wall,
                   **{f"{k}_share": v / wall for k, v in split.items()}}
            out.append(row)
            print(f"[bench] ingest split {label} / {row['analysis']}: {row['docs_per_s']:.1f} docs/s " +
                  " ".join(f"{k} {v / wall * 100:.0f}%" for k, v in split.items()), flush=True)
    return out


def write_ingest_split(args, rows: list[dict[str, Any]], revision: str) -> None:
    """bench/results/retrieval_ingest.{md,json}."""
    table = [[r["passages"], r["analysis"], f"{r['docs_per_s']:.1f}",
              *(f"{r[k + '_share'] * 100:.0f} %" for k in ("embed", "analysis", "bm25", "write"))] for r in rows]
    print(write_result("retrieval_ingest", "Retrieval-side ingest split", [
        f"In process: int8 embedding `{revision}` (batch 64, the embedding service's share), the service's analyser "
        f"(`{KoreanAnalyzer().info.label()}`), BM25, Qdrant Edge in memory. Shares are of the wall time; with "
        "overlap, `analysis` is only what it adds after embedding ends. Both variants were measured one after the "
        "other in the same run.", "",
        md_table(["passages", "analysis", "docs/s", "embedding", "analysis", "BM25", "Qdrant write"], table), ""],
        {"rows": rows}, out=args.out))


def main() -> None:
    """Run quality, latency and ingest; write the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10000, 100000])
    parser.add_argument("--client-sizes", type=int, nargs="*", default=[10000],
                        help="sizes also measured on qdrant-client local mode (slow)")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per mode and size")
    parser.add_argument("--ingest-docs", type=int, default=1024)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--ingest-split", action="store_true",
                        help="only the retrieval-side ingest split, short vs ~800-character passages, in process")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    model_dir = current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    if args.ingest_split:
        write_ingest_split(args, ingest_split(args.data, model_dir, revision), revision)
        return
    quality_rows = [] if args.skip_quality else quality(args.data, model_dir, revision)
    latency: dict[str, dict[str, LatencyStats]] = {}
    analyzer = KoreanAnalyzer()
    runs = [("edge", n) for n in args.sizes] + [("client", n) for n in args.client_sizes]
    for engine, size in runs:
        folder = Path(tempfile.mkdtemp(prefix="mesh-bench-qdrant-"))
        try:
            t = time.perf_counter()
            synthetic_catalog(folder, size, revision, analyzer, engine)
            print(f"[bench] {size} synthetic documents written ({engine}) in {time.perf_counter() - t:.0f}s",
                  flush=True)
            latency[f"{size:,}|{engine}"] = search_latency(folder, model_dir, revision, args.queries, engine)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    ingest_figures = ingest(args.data, model_dir, args.ingest_docs)
    write_report(args, quality_rows, latency, ingest_figures, revision)


def write_report(args, quality_rows, latency, ingest_figures, revision) -> None:
    """Markdown and JSON into bench/results/."""
    lines = [f"- Embedding: int8 model revision `{revision}`; quality and ingest on Qdrant Edge (embedded).", ""]
    if quality_rows:
        lines += ["## Quality on autorag-ko (720 pages, 114 questions)", "",
                  "Keyword rows use the analyser named; hybrid rows fuse that keyword leg with the dense leg. "
                  "`index ms/doc` is analysis + BM25 + write per page.", "",
                  md_table(["variant", "keyword analyser", "recall@10", "MRR@10", "nDCG@10", "hit@1", "index ms/doc"],
                           quality_rows), ""]
    if latency:
        rows = []
        for key, by_mode in latency.items():
            size, engine = key.split("|")
            engine_name = "Qdrant Edge (default)" if engine == "edge" else "qdrant-client local mode"
            for mode, st in by_mode.items():
                rows.append([size, engine_name, mode, f"{st.p50:.1f}", f"{st.p95:.1f}", f"{st.p99:.1f}"])
        lines += ["## Search latency through gRPC (query vector given)", "",
                  "Synthetic Korean product documents (random unit dense vectors, BM25 over 5-7 terms each), "
                  f"{args.queries} timed searches per row after 10 warm-up, top_k 10.", "",
                  md_table(["documents", "engine", "mode", "p50 ms", "p95 ms", "p99 ms"], rows), ""]
    f = ingest_figures
    lines += ["## Ingest end to end", "",
              f"{f['docs']} KLUE-STS sentences through `UpsertDocumentsStream` (batches of 64) into the retrieval "
              "service, which embeds through the embedding service (int8) and writes to Qdrant `:memory:`.", "",
              md_table(["docs/s", "embedding share", "tokenisation share", "Qdrant write share"],
                       [[f"{f['docs_per_s']:.1f}", f"{f['embed'] * 100:.0f} %", f"{f['tokenize'] * 100:.0f} %",
                         f"{f['write'] * 100:.0f} %"]]), ""]
    print(write_result("retrieval", "Retrieval bench", lines, {
        "quality": quality_rows, "latency": latency, "ingest": ingest_figures}, out=args.out))


if __name__ == "__main__":
    main()
