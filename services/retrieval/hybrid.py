"""Hybrid retrieval over one Qdrant collection: dense and BM25 legs, fused, explained.

One ``query_batch_points`` round trip runs each leg on its own (for the per-leg ranks every hit
carries) and, for RRF and DBSF, the fused query with both legs as prefetches, so Qdrant fuses.
WEIGHTED fusion (min-max normalised leg scores, weighted) is computed here from the legs.
Payload filters go inside every leg. MMR re-ranks the fused candidates by their dense vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.retrieval.korean.bm25 import SparseVector
from services.retrieval.query import SearchQuery
from services.retrieval.store import CatalogStore, LegQuery, RawHit


@dataclass
class LegResult:
    """Rank (1-based) and raw score of a document in one leg."""

    rank: int
    score: float


@dataclass
class ScoredDoc:
    """A result with its final score and where it stood in each leg."""

    doc_id: str
    score: float
    text: str
    payload: dict[str, Any]
    dense: LegResult | None = None
    keyword: LegResult | None = None
    vector: np.ndarray | None = field(default=None, repr=False)


def _doc(hit: RawHit) -> ScoredDoc:
    vec = None if hit.vector is None else np.asarray(hit.vector, dtype=np.float32)
    return ScoredDoc(hit.doc_id, hit.score, hit.text, hit.payload, vector=vec)
def weighted_fusion(dense: list[ScoredDoc], keyword: list[ScoredDoc], dense_weight: float) -> list[ScoredDoc]:
    """Weighted sum of min-max normalised leg scores (a document missing from a leg scores 0 there)."""

    def normalised(docs: list[ScoredDoc]) -> dict[str, float]:
        if not docs:
            return {}
        scores = np.array([d.score for d in docs])
        lo, hi = float(scores.min()), float(scores.max())
        span = hi - lo or 1.0
        return {d.doc_id: (d.score - lo) / span for d in docs}

    nd, nk = normalised(dense), normalised(keyword)
    by_id = {d.doc_id: d for d in keyword}
    by_id.update({d.doc_id: d for d in dense})
    fused = []
    for doc_id, d in by_id.items():
        score = dense_weight * nd.get(doc_id, 0.0) + (1 - dense_weight) * nk.get(doc_id, 0.0)
        fused.append(ScoredDoc(doc_id, score, d.text, d.payload, vector=d.vector))
    fused.sort(key=lambda d: d.score, reverse=True)
    return fused


def mmr(docs: list[ScoredDoc], top_k: int, diversity: float) -> list[ScoredDoc]:
    """Maximal marginal relevance: trade relevance (the fused order) against similarity to picks."""
    if len(docs) <= 1 or any(d.vector is None for d in docs):
        return docs[:top_k]
    vecs = np.stack([d.vector for d in docs])  # type: ignore[misc]
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rel = np.array([d.score for d in docs], dtype=np.float64)
    rel = (rel - rel.min()) / ((rel.max() - rel.min()) or 1.0)
    sim = vecs @ vecs.T
    chosen: list[int] = []
    left = list(range(len(docs)))
    while left and len(chosen) < top_k:
        if chosen:
            penalty = sim[np.ix_(left, chosen)].max(axis=1)
        else:
            penalty = np.zeros(len(left))
        scores = (1 - diversity) * rel[left] - diversity * penalty
        pick = left[int(np.argmax(scores))]
        chosen.append(pick)
        left.remove(pick)
    return [docs[i] for i in chosen]


class HybridSearcher:
    """Runs a validated search against one collection (blocking; call off the event loop)."""

    def __init__(self, store: CatalogStore) -> None:
        self.store = store

    def search(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
               sparse: SparseVector) -> list[ScoredDoc]:
        """Hits best first, each with its per-leg rank and score."""
        want = q.mmr_candidates or (4 * q.top_k if q.mmr_diversity is not None else q.top_k)
        leg_limit = max(want, 50) if mode == "hybrid" else want
        with_vectors = q.mmr_diversity is not None
        common = dict(filter=q.filter, with_vectors=with_vectors, sparse_indices=tuple(sparse.indices),
                      sparse_values=tuple(sparse.values), dense=dense_vec)
        queries: list[LegQuery] = []
        legs: list[str] = []
        if mode in ("hybrid", "dense"):
            queries.append(LegQuery(kind="dense", limit=leg_limit, **common))  # type: ignore[arg-type]
            legs.append("dense")
        if mode in ("hybrid", "keyword") and sparse.indices:
            queries.append(LegQuery(kind="sparse", limit=leg_limit, **common))  # type: ignore[arg-type]
            legs.append("keyword")
        fused_by_engine = mode == "hybrid" and q.fusion in ("rrf", "dbsf") and len(legs) == 2
        if fused_by_engine:
            queries.append(LegQuery(kind="fused", limit=want, fusion=q.fusion, rrf_k=q.rrf_k,
                                    prefetch_limit=leg_limit, **common))  # type: ignore[arg-type]
        if not queries:
            return []  # keyword search whose query has no index terms
        answers = self.store.query(collection, queries)
        leg_docs = {name: [_doc(h) for h in hits] for name, hits in zip(legs, answers, strict=False)}
        if fused_by_engine:
            results = [_doc(h) for h in answers[-1]]
        elif mode == "hybrid" and len(legs) == 2:
            results = weighted_fusion(leg_docs["dense"], leg_docs["keyword"], q.dense_weight)[:want]
        else:
            results = leg_docs[legs[0]][:want]
        ranks = {name: {d.doc_id: LegResult(i + 1, d.score) for i, d in enumerate(docs)}
                 for name, docs in leg_docs.items()}
        for d in results:
            d.dense = ranks.get("dense", {}).get(d.doc_id)
            d.keyword = ranks.get("keyword", {}).get(d.doc_id)
        if q.mmr_diversity is not None:
            results = mmr(results, q.top_k, q.mmr_diversity)
        results = results[: q.top_k]
        if q.score_threshold is not None:
            # Scores travel as float32; compare at that precision so a hit's own score passes.
            floor = np.float32(q.score_threshold)
            results = [d for d in results if np.float32(d.score) >= floor]
        return results
