"""Hybrid retrieval over one Qdrant collection: dense and BM25 legs, fused here, explained.

One ``query_batch_points`` round trip runs each leg on its own; every fusion (RRF, DBSF, weighted
and AUTO) is then computed in the service from the two leg lists, so a hit's fused score, its
per-leg ranks and the order of ties do not depend on the engine (Qdrant Edge, local mode or a
server) nor on the process: ties are broken by the best leg rank, then by document id.
Payload filters go inside every leg. MMR re-ranks the fused candidates by their dense vectors.

A collection of passages (services/retrieval/passages.py) is searched passage by passage in both
legs; by default each leg then keeps one hit per document, its best passage (so a document scores
what its best passage scores, in each leg), and fusion, MMR and the floor run over documents as
before. ``group_by="passage"`` keeps every passage as its own hit. The legs fetch
``PASSAGE_FETCH`` times as many passages as documents are wanted, and again with more when the
passages of a few documents filled them.
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
    best_passages,
    fuse,
    mmr,
    stable_order,
)
from services.retrieval.korean.bm25 import SparseVector
from services.retrieval.query import SearchQuery
from services.retrieval.store import CatalogStore, LegQuery

PASSAGE_FETCH = 4  # passages fetched per document wanted, per leg, when a collection holds passages
MAX_PASSAGE_FETCH = 2000  # a leg's passages at most (the second try)


class HybridSearcher:
    """Runs a validated search against one collection (blocking; call off the event loop)."""

    SIZE_TTL_S = 30.0  # how long a collection's document count (AUTO's log N) is reused

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self._sizes: dict[str, tuple[int, int, float]] = {}

    def collection_size(self, collection: str) -> int:
        """Documents in the collection, counted at most every ``SIZE_TTL_S`` (only AUTO reads it, as log N)."""
        return self._shape(collection)[0]

    def _shape(self, collection: str) -> tuple[int, int]:
        """(documents, points) of the collection, counted at most every ``SIZE_TTL_S``."""
        docs, points, when = self._sizes.get(collection, (0, 0, -1e18))
        if time.monotonic() - when > self.SIZE_TTL_S:
            points = self.store.count_points(collection)
            docs = points - self.store.count_points(collection, later_passages=True)
            self._sizes[collection] = (docs, points, time.monotonic())
        return docs, points

    def search(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
               sparse: SparseVector) -> list[ScoredDoc]:
        """Hits best first, each with its per-leg rank and score."""
        return self.run(collection, q, mode, dense_vec, sparse).hits

    def run(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
            sparse: SparseVector, passages: bool = False) -> Ranked:
        """Hits best first with the fusion that ran and why (``passages``: the collection holds passages).

        Document hits of a collection of passages come with their document's whole text.
        """
        want = q.mmr_candidates or (4 * q.top_k if q.mmr_diversity is not None else q.top_k)
        leg_docs = self.legs(collection, q, mode, dense_vec, sparse, passages)
        if not leg_docs:
            return Ranked([])  # keyword search whose query has no index terms
        size = self.collection_size(collection) if mode == "hybrid" and q.fusion == "auto" else 0
        ranked = self.finish(q, mode, leg_docs, want, len(sparse.indices), size)
        if passages and q.group_by == "document":
            self.whole_texts(collection, ranked.hits)
        return ranked

    def whole_texts(self, collection: str, hits: list[ScoredDoc]) -> None:
        """Give each document hit whose best passage is not the whole document its whole text (one read)."""
        partial = [h for h in hits if h.passage is not None and h.passage.passages > 1]
        if not partial:
            return
        texts = self.store.document_texts(collection, sorted({h.doc_id for h in partial}))
        for h in partial:
            h.text = texts.get(h.doc_id, h.text)

    def legs(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
             sparse: SparseVector, passages: bool = False) -> dict[str, list[ScoredDoc]]:
        """Each leg's candidates as the engine ranked them, in one round trip (``finish`` orders ties).

        From a collection of passages every passage comes back; with ``group_by="document"``
        ``finish`` keeps each document's best, so a leg asks for more passages than documents
        wanted, and once more (up to ``MAX_PASSAGE_FETCH``) when it came back full with too few documents.
        """
        want = q.mmr_candidates or (4 * q.top_k if q.mmr_diversity is not None else q.top_k)
        leg_limit = max(want, LEG_CANDIDATES) if mode == "hybrid" else want
        grouped = passages and q.group_by == "document"
        docs_wanted = leg_limit
        if grouped:
            docs, points = self._shape(collection)
            if points > docs:  # some document has several passages (a catalog of short ones: no extra depth)
                leg_limit = min(MAX_PASSAGE_FETCH, leg_limit * PASSAGE_FETCH)
        out = self._legs(collection, q, mode, dense_vec, sparse, leg_limit, passages)
        if grouped and leg_limit < MAX_PASSAGE_FETCH and any(
                len(docs) == leg_limit and len({d.doc_id for d in docs}) < docs_wanted for docs in out.values()):
            out = self._legs(collection, q, mode, dense_vec, sparse, MAX_PASSAGE_FETCH, passages)
        return out

    def _legs(self, collection: str, q: SearchQuery, mode: str, dense_vec: list[float] | None,
              sparse: SparseVector, leg_limit: int, passages: bool) -> dict[str, list[ScoredDoc]]:
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
        by_passage = passages and q.group_by == "passage"
        return {name: [_doc(h, by_passage) for h in hits] for name, hits in zip(legs, answers, strict=True)}

    @staticmethod
    def finish(q: SearchQuery, mode: str, leg_docs: dict[str, list[ScoredDoc]], want: int, n_terms: int = 0,
               collection_size: int = 0) -> Ranked:
        """Fuse (hybrid) or rank (one leg), then MMR, top_k and the score floor.

        ``n_terms`` (distinct query terms) and ``collection_size`` are AUTO's evidence.
        """
        leg_docs = {name: _leg_sorted(docs) for name, docs in leg_docs.items()}
        if q.group_by == "document":
            leg_docs = {name: best_passages(docs) for name, docs in leg_docs.items()}
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

