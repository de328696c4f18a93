"""Long documents as passages: the layouts compared, the passage size chosen, and retrieval before and after.

    python -m bench.passages --data ../shared/data [--sizes 400,600,1000] [--out bench/results]

Sets:

- ``long-ko`` (built here from autorag-ko): the pages of each PDF joined in order into documents of
  5,000 to 20,000 characters (a longer PDF gives several); a question is kept when the page that
  answers it starts at least 2,000 characters into its document, so the first page never holds
  it. Its relevant document is the one holding that page. Every document is a candidate.
- ``autorag-ko`` (shared data): the 720 pages as documents (870 characters median, 2,484 at most).
- ``klue-sts-para`` and ``paraphrase-ko`` (see bench/fusion_eval.py): short documents, one passage each.

Layouts, each built in an in-memory Qdrant Edge collection with the service's code (its cut,
analyser, BM25 and ``HybridSearcher``, default fusion AUTO, top 10):

- ``document``: one point per document, as before passages (its vector covers the first 512 tokens).
- ``passages``: one point per passage (services/retrieval/passages.py), grouped by document at search
  time (the service's default, ``group_by="document"``).
- ``multivector``: one point per document, its passages' vectors as one multivector (MaxSim), the
  keyword leg over the whole document (what a multivector point can hold: one sparse vector).

What is tuned where: the passage size (``--sizes``) is chosen on the **tune halves** of long-ko and
autorag-ko (questions with an even index; the two sets share their questions) by their mean
nDCG@10; every figure reported is on the **eval halves** (odd indexes) of those two, and on all
questions of the two short sets, which chose nothing. Paired randomisation test and bootstrap
interval as in fusion_eval.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench.common import md_table
from bench.fusion_eval import EvalSet, load_autorag, load_klue, load_paraphrase, ndcg10, paired_test
from bench.report import write_result
from bench.retrieval import embed_cached
from services.retrieval.fusion import LEG_CANDIDATES, ScoredDoc, _doc
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import DOCUMENT_LAYOUT, PASSAGE_LAYOUT, Layout
from services.retrieval.prepare import spans_of
from services.retrieval.query import SearchQuery
from services.retrieval.store import RawHit, StoredPoint, open_store
from services.runtime.models import current_model_dir

MIN_CHARS, MAX_CHARS, PAST = 5_000, 20_000, 2_000


def load_long(data: Path) -> tuple[EvalSet, dict[str, int]]:
    """long-ko (see the module's docstring) and, per kept question, where its page starts in its document."""
    base = load_autorag(data)
    pages: dict[str, list[tuple[int, str, str]]] = {}
    for pid, text in base.passages:
        m = re.match(r"^a:(.*) - (\d+)$", pid)
        file, page = (m.group(1), int(m.group(2))) if m else (pid, 0)
        pages.setdefault(file, []).append((page, pid, text))
    docs: list[tuple[str, str]] = []
    where: dict[str, tuple[str, int]] = {}  # page id -> (document id, offset)
    for file, rows in sorted(pages.items()):
        rows.sort()
        parts: list[tuple[str, str]] = []
        size = 0

        def flush(file: str = file) -> None:
            nonlocal parts, size
            if not parts:
                return
            doc_id = f"l:{file}#{len(docs)}"
            offset = 0
            for pid, text in parts:
                where[pid] = (doc_id, offset)
                offset += len(text) + 2
            docs.append((doc_id, "\n\n".join(t for _, t in parts)))
            parts, size = [], 0

        for _, pid, text in rows:
            if parts and size + len(text) + 2 > MAX_CHARS:
                flush()
            parts.append((pid, text))
            size += len(text) + 2
        flush()
    # Documents shorter than MIN_CHARS (a PDF of one or two pages) stay as distractors; no question is kept on them.
    lengths = {d: len(t) for d, t in docs}
    queries, offsets = [], {}
    for text, rel in base.queries:
        hits = [where[p] for p in rel if p in where]
        if hits and all(lengths[d] >= MIN_CHARS and off >= PAST for d, off in hits):
            queries.append((text, frozenset(d for d, _ in hits)))
            offsets[text] = min(off for _, off in hits)
    return EvalSet("long-ko", docs, queries), offsets


def disk_bytes(folder: Path) -> int:
    """Bytes the folder's files take on disk (allocated blocks: the engine's files are sparse, preallocated)."""
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file())


def halves(ev: EvalSet) -> tuple[EvalSet, EvalSet]:
    """(tune, eval): questions with even and odd indexes."""
    return (EvalSet(ev.name + " (tune)", ev.passages, ev.queries[0::2]),
            EvalSet(ev.name, ev.passages, ev.queries[1::2]))


@dataclass
class Built:
    """One set in one layout: the collection, and what building it cost."""

    layout: str
    search: Any
    points: int
    passages: int
    bytes: int
    embed_s: float
    analyse_s: float
    write_s: float


class Indexer:
    """Builds a set in a layout with the service's pieces (cut, analyser, BM25, store, searcher)."""

    def __init__(self, analyzer: KoreanAnalyzer, model_dir: Path, revision: str) -> None:
        self.analyzer, self.model_dir, self.revision = analyzer, model_dir, revision
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-passages-"))

    def vectors(self, texts: list[str]) -> tuple[np.ndarray, float]:
        t = time.perf_counter()
        return embed_cached(texts, False, self.model_dir, self.revision), time.perf_counter() - t

    def pieces(self, ev: EvalSet, layout: Layout) -> tuple[list[list[tuple[int, int, int]]], list[str]]:
        spans = [[(s.ordinal, s.start, s.end) for s in spans_of(text, layout)] for _, text in ev.passages]
        texts = [text[s:e] for (_, text), sp in zip(ev.passages, spans, strict=True) for _, s, e in sp]
        return spans, texts

    def build(self, ev: EvalSet, layout: Layout) -> Built:
        spans, texts = self.pieces(ev, layout)
        vecs, embed_s = self.vectors(texts)
        t = time.perf_counter()
        terms = self.analyzer.terms_batch(texts)
        analyse_s = time.perf_counter() - t
        avg = float(np.mean([max(1, len(x)) for x in terms]))
        folder = self.tmp / f"{ev.name}-{layout.label().replace(':', '-').replace('/', '-')}"
        store = open_store(str(folder), "edge")
        meta = store.create_catalog("eval", {}, self.revision, self.analyzer.info.label(), vecs.shape[1], avg,
                                    layout.label())
        bm = Bm25(avg_doc_len=avg)
        points, k = [], 0
        for (doc_id, text), sp in zip(ev.passages, spans, strict=True):
            for ordinal, s, e in sp:
                sv = bm.document(terms[k])
                points.append(StoredPoint(doc_id, text[s:e], {}, vecs[k].tolist(), sv.indices, sv.values, ordinal,
                                          s, e, len(sp), text if ordinal == 0 and len(sp) > 1 else None))
                k += 1
        t = time.perf_counter()
        for i in range(0, len(points), 256):
            store.upsert(meta.collection, points[i:i + 256])
        store.optimize(meta.collection)
        write_s = time.perf_counter() - t
        size = disk_bytes(folder / "collections" / meta.collection)
        searcher = HybridSearcher(store)

        def search(qterms: list[str], qvec: np.ndarray) -> list[str]:
            q = SearchQuery(text="x", top_k=10, mode="hybrid")
            ranked = searcher.run(meta.collection, q, "hybrid", qvec.tolist(), Bm25.query(qterms), layout.passages)
            return [h.doc_id for h in ranked.hits]

        return Built(layout.label(), search, len(points), len(texts), size, embed_s, analyse_s, write_s)

    def build_multivector(self, ev: EvalSet, layout: Layout) -> Built:
        """One point per document: passage vectors as a MaxSim multivector, whole-document BM25."""
        spans, texts = self.pieces(ev, layout)
        vecs, embed_s = self.vectors(texts)
        t = time.perf_counter()
        terms = self.analyzer.terms_batch([text for _, text in ev.passages])
        analyse_s = time.perf_counter() - t
        avg = float(np.mean([max(1, len(x)) for x in terms]))
        folder = self.tmp / f"{ev.name}-multivector"
        config = qe.EdgeConfig(vectors={"dense": qe.EdgeVectorParams(
            size=vecs.shape[1], distance=qe.Distance.Cosine,
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim))},
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})
        shard = qe.EdgeShard.create(str(folder), config)
        bm = Bm25(avg_doc_len=avg)
        t = time.perf_counter()
        k = 0
        points = []
        for i, ((doc_id, text), sp, toks) in enumerate(zip(ev.passages, spans, terms, strict=True)):
            sv = bm.document(toks)
            points.append(qe.Point(id=i, vector={"dense": [v.tolist() for v in vecs[k:k + len(sp)]],
                                                 "bm25": qe.SparseVector(indices=sv.indices, values=sv.values)},
                                   payload={"doc_id": doc_id, "text": text}))
            k += len(sp)
        for i in range(0, len(points), 256):
            shard.update(qe.UpdateOperation.upsert_points(points[i:i + 256]))
        shard.flush()
        shard.optimize()
        write_s = time.perf_counter() - t
        size = disk_bytes(folder)

        def hits(points_: list[Any]) -> list[ScoredDoc]:
            return [_doc(RawHit(p.payload["doc_id"], float(p.score), "", {})) for p in points_]

        def search(qterms: list[str], qvec: np.ndarray) -> list[str]:
            sparse = Bm25.query(qterms)
            reqs = [qe.QueryRequest(query=qe.Query.Nearest([qvec.tolist()], using="dense"), limit=LEG_CANDIDATES,
                                    with_payload=["doc_id"])]
            if sparse.indices:
                reqs.append(qe.QueryRequest(query=qe.Query.Nearest(qe.SparseVector(indices=sparse.indices,
                                                                                   values=sparse.values), using="bm25"),
                                            limit=LEG_CANDIDATES, with_payload=["doc_id"]))
            answers = shard.query_batch(qe.QueryBatchRequest(reqs))
            legs = {"dense": hits(answers[0])}
            if len(answers) > 1:
                legs["keyword"] = hits(answers[1])
            q = SearchQuery(text="x", top_k=10, mode="hybrid")
            ranked = HybridSearcher.finish(q, "hybrid", legs, 10, len(sparse.indices), len(ev.passages))
            return [h.doc_id for h in ranked.hits]

        return Built("multivector", search, len(points), len(texts), size, embed_s, analyse_s, write_s)

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def score(built: Built, ev: EvalSet, qterms: list[list[str]], qvecs: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query nDCG@10, recall@10 and MRR@10, and each query's search time."""
    out: dict[str, list[float]] = {"ndcg": [], "recall": [], "mrr": [], "ms": []}
    for (_, rel), terms, vec in zip(ev.queries, qterms, qvecs, strict=True):
        t = time.perf_counter()
        ids = built.search(terms, vec)
        out["ms"].append((time.perf_counter() - t) * 1e3)
        n, r, m = ndcg10(ids, rel)
        out["ndcg"].append(n)
        out["recall"].append(r)
        out["mrr"].append(m)
    return {k: np.asarray(v) for k, v in out.items()}


def main() -> None:
    """Tune the passage size on long-ko's tune half, then compare the layouts on every set."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--sizes", default="400,600,1000,1500",
                        help="passage sizes tried on the tune halves of long-ko and autorag-ko")
    parser.add_argument("--overlap", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    started = time.time()
    model_dir = current_model_dir()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    analyzer = KoreanAnalyzer()
    indexer = Indexer(analyzer, model_dir, revision)
    long_all, offsets = load_long(args.data)
    long_tune, long_eval = halves(long_all)
    auto = load_autorag(args.data)
    _, auto_eval = halves(auto)
    sets = [long_eval, EvalSet("autorag-ko", auto.passages, auto_eval.queries), load_klue(args.data),
            load_paraphrase()]

    def queries(ev: EvalSet) -> tuple[list[list[str]], np.ndarray]:
        texts = [q for q, _ in ev.queries]
        return analyzer.terms_batch(texts), embed_cached(texts, True, model_dir, revision)

    # 1. The passage size, on the tune halves of long-ko and autorag-ko (their even-index questions).
    auto_tune = EvalSet("autorag-ko (tune)", auto.passages, auto.queries[0::2])
    tune_sets = [(long_tune, queries(long_tune)), (auto_tune, queries(auto_tune))]
    tuning = []
    for size in (int(s) for s in args.sizes.split(",")):
        layout = Layout(PASSAGE_LAYOUT, size, min(args.overlap, size // 3))
        row: dict[str, Any] = {"chars": size}
        for ev, q in tune_sets:
            built = indexer.build(ev, layout)
            res = score(built, ev, *q)
            row[ev.name] = float(res["ndcg"].mean())
        row["mean"] = float(np.mean([row[ev.name] for ev, _ in tune_sets]))
        tuning.append(row)
        print(f"[bench] tune {size}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k != "chars"), flush=True)
    best = int(max(tuning, key=lambda r: (r["mean"], -r["chars"]))["chars"])
    chosen = Layout(PASSAGE_LAYOUT, best, min(args.overlap, best // 3))

    # 2. Every set in each layout (multivector on the sets whose documents are cut).
    rows, layout_rows, per_query = [], [], {}
    for ev in sets:
        q = queries(ev)
        builds = [indexer.build(ev, Layout(DOCUMENT_LAYOUT, 0, 0)), indexer.build(ev, chosen)]
        if builds[1].passages > len(ev.passages):
            builds.append(indexer.build_multivector(ev, chosen))
        results = {b.layout: score(b, ev, *q) for b in builds}
        base = results[DOCUMENT_LAYOUT]
        for b in builds:
            r = results[b.layout]
            p, lo, hi = paired_test(r["ndcg"], base["ndcg"]) if b.layout != DOCUMENT_LAYOUT else (1.0, 0.0, 0.0)
            rows.append({"set": ev.name, "layout": b.layout, "documents": len(ev.passages), "queries": len(ev.queries),
                         "ndcg10": float(r["ndcg"].mean()), "recall10": float(r["recall"].mean()),
                         "mrr10": float(r["mrr"].mean()), "delta_ndcg": float(r["ndcg"].mean() - base["ndcg"].mean()),
                         "p": p, "ci": [lo, hi], "search_ms_p50": float(np.median(r["ms"]))})
            layout_rows.append({"set": ev.name, "layout": b.layout, "points": b.points, "vectors": b.passages,
                                "index_bytes": b.bytes, "bytes_per_document": b.bytes / len(ev.passages),
                                "embed_s": b.embed_s, "analyse_s": b.analyse_s, "write_s": b.write_s})
            per_query[f"{ev.name}/{b.layout}"] = r["ndcg"].round(4).tolist()
        print(f"[bench] {ev.name}: " + ", ".join(f"{k} {v['ndcg'].mean():.3f}" for k, v in results.items()), flush=True)
    indexer.close()
    report(args, long_all, offsets, tuning, chosen, rows, layout_rows, per_query, revision, time.time() - started)


def report(args, long_all: EvalSet, offsets: dict[str, int], tuning, chosen: Layout, rows, layout_rows, per_query,
           revision: str, seconds: float) -> None:
    """Write bench/results/passages.{md,json}."""
    lengths = [len(t) for _, t in long_all.passages]
    long_docs = sum(1 for n in lengths if n >= MIN_CHARS)
    lines = [
        f"- Took {seconds / 60:.1f} min.",
        f"- Embedding int8 `{revision}` in process; Qdrant Edge on a temporary folder; analyser Kiwi, default "
        "profile; the service's `HybridSearcher` (AUTO fusion, top 10 documents, 50 candidates per leg; passages "
        "fetched 4 per document wanted).",
        f"- long-ko: {len(long_all.passages)} documents from autorag-ko's PDFs ({long_docs} of 5,000-20,000 "
        f"characters, the rest shorter PDFs kept as distractors; median {int(np.median(lengths)):,} characters), "
        f"{len(long_all.queries)} questions whose page starts 2,000+ characters in (median offset "
        f"{int(np.median(list(offsets.values()))):,}); tune half {len(long_all.queries[0::2])}, eval half "
        f"{len(long_all.queries[1::2])}.",
        "- What is tuned where: the passage size on the tune halves of long-ko and autorag-ko (even-index "
        "questions; table 1); every other figure is on their eval halves (odd indexes) or on the short sets, "
        "which chose nothing.",
        "",
        "## 1. Passage size (tune halves, nDCG@10, AUTO fusion, document-level)",
        "",
        md_table(["characters", "overlap", "long-ko (tune)", "autorag-ko (tune)", "mean"],
                 [[str(r["chars"]), str(min(args.overlap, r["chars"] // 3)), f"{r['long-ko (tune)']:.3f}",
                   f"{r['autorag-ko (tune)']:.3f}", f"{r['mean']:.3f}"] for r in tuning]),
        "",
        f"Chosen: **{chosen.label()}** (the highest mean of the two; the smaller size on a tie).",
        "",
        "## 2. Retrieval by layout (document-level, eval halves)",
        "",
        md_table(["set", "layout", "documents", "queries", "nDCG@10", "Δ vs document [95 % CI]", "p", "recall@10",
                  "MRR@10"],
                 [[r["set"], r["layout"], str(r["documents"]), str(r["queries"]), f"{r['ndcg10']:.3f}",
                   "" if r["layout"] == DOCUMENT_LAYOUT else
                   f"{r['delta_ndcg']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]",
                   "" if r["layout"] == DOCUMENT_LAYOUT else f"{r['p']:.3f}", f"{r['recall10']:.3f}",
                   f"{r['mrr10']:.3f}"] for r in rows]),
        "",
        "## 3. Layouts: index size and build time",
        "",
        "Index size: the collection folder's allocated blocks after optimising (Qdrant Edge preallocates sparse "
        "segment files: their apparent size is the same for every layout). Embedding time is that of this run "
        "(vectors cached between runs: 0 when cached); ingest speed through the service is in "
        "bench/results/long_documents.md.",
        "",
        md_table(["set", "layout", "points", "vectors", "index MB", "KB per document", "embed s (cached: ~0)",
                  "analyse s", "write + optimise s"],
                 [[r["set"], r["layout"], str(r["points"]), str(r["vectors"]), f"{r['index_bytes'] / 1e6:.1f}",
                   f"{r['bytes_per_document'] / 1e3:.1f}", f"{r['embed_s']:.1f}", f"{r['analyse_s']:.1f}",
                   f"{r['write_s']:.1f}"] for r in layout_rows]),
        "",
    ]
    print(write_result("passages", "Long documents as passages", lines, {
        "sizes": args.sizes, "tuning": tuning, "chosen": chosen.label(), "rows": rows, "layouts": layout_rows,
        "per_query_ndcg": per_query, "seconds": seconds}, out=args.out))


if __name__ == "__main__":
    main()
