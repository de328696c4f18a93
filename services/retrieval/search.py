"""Hybrid, dense and keyword search; keyword-only (degraded) when no query vector can be had."""

from __future__ import annotations

import logging
import time

from opentelemetry import trace

from services.bootstrap.errors import (
    DependencyUnavailable,
    FailedPrecondition,
    MeshError,
    NotFound,
)
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import Layout
from services.retrieval.query import (
    SearchQuery,
    validate_search,
)
from services.retrieval.state import CatalogState, EmbeddingUnavailable, SearchOutcome
from services.retrieval.store import CatalogMeta

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.retrieval")


class CatalogSearch:
    """Searches over the shared state, counted in flight so a reindex drops an old collection only when unused."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state

    async def search(self, name: str, q: SearchQuery, deadline_s: float | None = None) -> SearchOutcome:
        """Hybrid / dense / keyword search; keyword-only (degraded) when no query vector can be had."""
        start = time.perf_counter()
        meta = await self.state.meta(name)
        try:
            return await self._counted(meta, q, deadline_s, start)
        except Exception as err:
            if isinstance(err, MeshError) and not isinstance(err, NotFound):
                raise
            # The writer (another replica) may have swapped and dropped the version this copy of the
            # metadata names: search the live one once; a failure with the same version is the store's.
            live = await self.state.meta(name, fresh=True)
            if live.collection == meta.collection:
                raise
            return await self._counted(live, q, deadline_s, start)

    async def _counted(self, meta: CatalogMeta, q: SearchQuery, deadline_s: float | None,
                       start: float) -> SearchOutcome:
        self.state.inflight[meta.collection] += 1
        try:
            return await self._search(meta, q, deadline_s, start)
        finally:
            self.state.inflight[meta.collection] -= 1
            if self.state.inflight[meta.collection] <= 0:
                del self.state.inflight[meta.collection]

    async def run(self, meta: CatalogMeta, q: SearchQuery, deadline_s: float | None = None) -> SearchOutcome:
        """One search of the version ``meta`` describes, whether or not an alias points at it (a quality gate's)."""
        return await self._search_stages(meta, q, deadline_s, time.perf_counter())

    async def _search(self, meta: CatalogMeta, q: SearchQuery, deadline_s: float | None,
                      start: float) -> SearchOutcome:
        with TRACER.start_as_current_span("retrieval.search", attributes={
                "mesh.collection": meta.name, "mesh.requested_mode": q.mode or "hybrid",
                "mesh.vector_given": q.vector is not None}) as span:
            out = await self._search_stages(meta, q, deadline_s, start)
            span.set_attributes({"mesh.mode": out.mode, "mesh.degraded": out.degraded, "mesh.hits": len(out.hits),
                                 "mesh.fusion": out.fusion or "", "mesh.model_revision": meta.embedding_revision})
            return out

    async def _search_stages(self, meta: CatalogMeta, q: SearchQuery, deadline_s: float | None,
                             start: float) -> SearchOutcome:
        name = meta.name
        self.state.check_analyzer(meta)
        validate_search(q, meta.fields, meta.dim, meta.embedding_revision)
        if q.vector is not None and q.vector_revision != meta.embedding_revision:
            raise FailedPrecondition(f"query_vector was made by embedding revision {q.vector_revision}; collection "
                                     f"{name!r} holds vectors of revision {meta.embedding_revision}: embed the query "
                                     "with that revision, or leave query_vector empty")
        mode = q.mode or "hybrid"
        degraded = False
        vector = q.vector
        embed_ns = 0
        if mode in ("hybrid", "dense") and vector is None:
            limit = self.state.embed_timeout_s
            budget = limit if deadline_s is None else min(limit, 0.5 * deadline_s)
            t = time.perf_counter()
            stage = TRACER.start_span("retrieval.embed", attributes={"mesh.budget_ms": round(budget * 1e3, 1)})
            try:
                with trace.use_span(stage, end_on_exit=True):
                    vecs, revision = await self.state.embed([q.text], "query", budget, meta.embedding_revision)
                if revision != meta.embedding_revision:
                    log.warning("query embedded with %s but %s holds %s: keyword only", revision, name,
                                meta.embedding_revision)
                    degraded = True
                else:
                    vector = vecs[0].tolist()
            except (EmbeddingUnavailable, DependencyUnavailable) as exc:
                # Per search at debug only: the health monitor logs the embedding service going away
                # and coming back once each, and the response says it degraded.
                log.debug("embedding unavailable (%s): keyword only", exc.message)
                degraded = True
            embed_ns = int((time.perf_counter() - t) * 1e9)
            if degraded:
                if mode == "dense":
                    raise EmbeddingUnavailable("dense search needs a query vector and the embedding service "
                                               "could not provide one")
                mode = "keyword"
        t = time.perf_counter()
        with TRACER.start_as_current_span("retrieval.analyze"):
            terms = (await self.state.terms([q.text]))[0] if mode != "dense" else []
            sparse = Bm25.query(terms)
        tokenize_ns = int((time.perf_counter() - t) * 1e9)
        t = time.perf_counter()
        # Both legs run in one engine round trip; fusion follows in the same call (hybrid.py).
        with TRACER.start_as_current_span("retrieval.legs_and_fusion", attributes={"mesh.mode": mode}) as span:
            passages = Layout.parse(meta.layout).passages
            ranked = await self.state.run_db(self.state.searcher.run, meta.collection, q, mode, vector, sparse,
                                             passages)
            hits = ranked.hits
            span.set_attributes({"mesh.dense_hits": sum(1 for h in hits if h.dense is not None),
                                 "mesh.keyword_hits": sum(1 for h in hits if h.keyword is not None),
                                 "mesh.fusion": ranked.fusion or ""})
        search_ns = int((time.perf_counter() - t) * 1e9)
        return SearchOutcome(hits, mode, degraded, ranked.fusion, embed_ns, tokenize_ns,
                             search_ns, int((time.perf_counter() - start) * 1e9), ranked.reason)

    def with_defaults(self, q: SearchQuery, fusion: str | None, rrf_k: int | None,
                      dense_weight: float | None) -> SearchQuery:
        """Fill unset fusion parameters from the service's configured defaults."""
        q.fusion = fusion or self.state.default_fusion
        q.rrf_k = rrf_k or self.state.default_rrf_k
        q.dense_weight = self.state.default_dense_weight if dense_weight is None else dense_weight
        return q
