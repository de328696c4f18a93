"""Hybrid retrieval over one Qdrant collection: dense and BM25 legs, fused here, explained.

One ``query_batch_points`` round trip runs each leg on its own; every fusion (RRF, DBSF, weighted
and AUTO) is then computed in the service from the two leg lists, so a hit's fused score, its
per-leg ranks and the order of ties do not depend on the engine (Qdrant Edge, local mode or a
server) nor on the process: ties are broken by the best leg rank, then by document id.
Payload filters go inside every leg. MMR re-ranks the fused candidates by their dense vectors.
"""

from __future__ import annotations

import time

import numpy as np

from services.retrieval.fusion import (
    LEG_CANDIDATES,
    Ranked,
    ScoredDoc,
    _doc,
    _leg_sorted,
    _pool,
    fuse,
    mmr,
    stable_order,
)
from services.retrieval.korean.bm25 import SparseVector
from services.retrieval.query import SearchQuery
from services.retrieval.store import CatalogStore, LegQuery


class HybridSearcher:
    """Runs a validated search against one collection (blocking; call off the event loop)."""

    SIZE_TTL_S = 30.0  # how long a collection's document count (AUTO's log N) is reused

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self._sizes: dict[str, tuple[int, float]] = {}

    def collection_size(self, collection: str) -> int:
        """Documents in the collection, counted at most every ``SIZE_TTL_S`` (only AUTO reads it, as log N)."""
        size, when = self._sizes.get(collection, (0, -1e18))
        if time.monotonic() - when > self.SIZE_TTL_S:
            size = self.store.count(collection)
            self._sizes[collection] = (size, time.monotonic())
        return size

    def search(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
               sparse: SparseVector) -> list[ScoredDoc]:
        """Hits best first, each with its per-leg rank and score."""
        return self.run(collection, q, mode, dense_vec, sparse).hits

    def run(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
            sparse: SparseVector) -> Ranked:
        """Hits best first with the fusion that ran and why."""
        want = q.mmr_candidates or (4 * q.top_k if q.mmr_diversity is not None else q.top_k)
        leg_docs = self.legs(collection, q, mode, dense_vec, sparse)
        if not leg_docs:
            return Ranked([])  # keyword search whose query has no index terms
        size = self.collection_size(collection) if mode == "hybrid" and q.fusion == "auto" else 0
        return self.finish(q, mode, leg_docs, want, len(sparse.indices), size)

    def legs(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
             sparse: SparseVector) -> dict[str, list[ScoredDoc]]:
        """Each leg's candidates as the engine ranked them, in one round trip (``finish`` orders ties)."""
        want = q.mmr_candidates or (4 * q.top_k if q.mmr_diversity is not None else q.top_k)
        leg_limit = max(want, LEG_CANDIDATES) if mode == "hybrid" else want
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
        if not queries:
            return {}
        answers = self.store.query(collection, queries)
        return {name: [_doc(h) for h in hits] for name, hits in zip(legs, answers, strict=True)}

    @staticmethod
    def finish(q: SearchQuery, mode: str, leg_docs: dict[str, list[ScoredDoc]], want: int, n_terms: int = 0,
               collection_size: int = 0) -> Ranked:
        """Fuse (hybrid) or rank (one leg), then MMR, top_k and the score floor.

        ``n_terms`` (distinct query terms) and ``collection_size`` are AUTO's evidence.
        """
        leg_docs = {name: _leg_sorted(docs) for name, docs in leg_docs.items()}
        fusion: str | None = None
        reason = ""
        if mode == "hybrid":
            fusion = q.fusion
            results, reason = fuse(q, leg_docs.get("dense", []), leg_docs.get("keyword", []), n_terms,
                                   collection_size)
            if "keyword" not in leg_docs:
                reason += "; the query has no index terms, so only the dense leg ran"
        else:
            results = list(_pool(leg_docs.get("dense", []), leg_docs.get("keyword", [])).values())
            for d in results:
                d.score = (d.dense or d.keyword).score  # type: ignore[union-attr]
            results = stable_order(results)
        results = results[:want]
        if q.mmr_diversity is not None:
            results = mmr(results, q.top_k, q.mmr_diversity)
        results = results[: q.top_k]
        if q.score_threshold is not None:
            # Scores travel as float32; compare at that precision so a hit's own score passes.
            floor = np.float32(q.score_threshold)
            results = [d for d in results if np.float32(d.score) >= floor]
        return Ranked(results, fusion, reason)

