"""Search: a query vector from the one owner (cache, breaker, budget), then retrieval; keyword-only when it fails."""

from __future__ import annotations

import asyncio
import time

import grpc
from opentelemetry import trace
from prometheus_client import Counter

from clients.errors import MeshClientError
from clients.retrieval import AsyncRetrievalClient, QueryVector, SearchResult
from clients.retrieval import Hit as RetrievedHit
from gateway.access.context import require_read
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError
from gateway.http.telemetry import note
from gateway.search import protocol as api
from gateway.search.expansion import QueryExpander
from gateway.vectors.query import Lookup, QueryVectors
from gateway.vectors.revisions import CollectionRevisions, VectorSources

TRACER = trace.get_tracer("gateway")
DEGRADED = Counter("mesh_gateway_search_degraded", "searches answered keyword-only", ["reason"])
REASONS = ("breaker_open", "unavailable", "deadline_exceeded", "resource_exhausted", "unknown")
DELEGATED = "delegated"  # no vector on purpose: retrieval embeds with the collection's own model
MERGE_RRF_K = 60  # RRF's usual constant (Cormack et al. 2009), not fitted to any set
for _reason in REASONS:
    DEGRADED.labels(_reason)  # every series exists from the start


class Search:
    """Composes the query vector and retrieval for ``POST /v1/search`` (and the recommendation routes)."""

    def __init__(self, vectors: QueryVectors, retrieval: AsyncRetrievalClient,
                 expander: QueryExpander | None = None, sources: VectorSources | None = None) -> None:
        self.vectors = vectors
        self.retrieval = retrieval
        self.expander = expander
        self.sources = sources or VectorSources(vectors)
        self.revisions = CollectionRevisions(retrieval)

    async def _source(self, collection: str, deadline: Deadline) -> QueryVectors | None:
        """The embedding instance serving the revision ``collection`` holds (None: retrieval embeds the query).

        Every search and query vector passes here: 404 first when the caller's key may not read ``collection``.
        """
        require_read(collection)
        wanted = await self.revisions.get(collection, deadline)
        return await self.sources.serving(wanted, deadline) if wanted else self.vectors

    async def query_vector(self, collection: str, text: str, deadline: Deadline) -> QueryVector | None:
        """The vector a search of ``text`` on ``collection`` would use (None: none now; the search then degrades).

        Through the query-vector cache, so the search that follows embeds nothing again.
        """
        vectors = await self._source(collection, deadline)
        return None if vectors is None else (await vectors.lookup(text, deadline)).vector

    async def search(self, req: api.SearchRequest, deadline: Deadline) -> api.SearchResponse:
        """Run one search within ``deadline``: one query, or several merged (given, or derived by ``expand``)."""
        require_read(req.collection)
        start = time.perf_counter()
        texts = req.texts()
        derived: list[str] = []
        expansion: api.Expansion | None = None
        if req.expand is not None and req.query is not None:
            if self.expander is None:
                raise ApiError(400, "invalid_argument", "this gateway has no model route for derived queries",
                               fields=[FieldError(field="expand", description="not served here")])
            with TRACER.start_as_current_span("gateway.expand", attributes={"mesh.expand_n": req.expand.n}) as span:
                derived, expansion = await self.expander.derive(req.query, req.expand, deadline)
                span.set_attributes({"mesh.expansion": expansion.status, "mesh.derived": len(derived)})
            texts += derived
        several = req.queries is not None or req.expand is not None
        vectors: QueryVectors | None = self.vectors
        if req.mode == "keyword":
            found = [Lookup(None, 0.0, False, "")] * len(texts)
        else:
            with TRACER.start_as_current_span("gateway.query_vector", attributes={"mesh.queries": len(texts)}) as span:
                vectors = await self._source(req.collection, deadline)
                if vectors is None:  # no instance of the gateway serves the collection's model: retrieval embeds
                    found = [Lookup(None, 0.0, False, DELEGATED)] * len(texts)
                else:
                    found = (await vectors.lookup_many(texts, deadline) if several
                             else [await vectors.lookup(texts[0], deadline)])
                span.set_attributes({"mesh.cache_hit": all(f.cache_hit for f in found),
                                     "mesh.degraded_reason": next((f.reason for f in found if f.reason), ""),
                                     "mesh.breaker": (vectors or self.vectors).breaker.state})
        embed_ms = max(f.ms for f in found)
        t = time.perf_counter()
        legs = await asyncio.gather(*(self._leg(req, text, f, deadline) for text, f in zip(texts, found, strict=True)))
        retrieval_ms = (time.perf_counter() - t) * 1e3
        degraded = any(d for _, d in legs)
        reason = next((f.reason for f in found if f.reason and f.reason != DELEGATED), "")
        cache_hit = all(f.cache_hit for f in found)
        first = legs[0][0]
        revision = next((f.vector.revision for f in found if f.vector), (vectors or self.vectors).revision)
        hits = ([_hit(h) for h in first.hits] if not several
                else merge(legs, req.top_k, by_passage=req.group_by == "passage"))
        note(collection=req.collection, mode=first.mode, degraded=degraded, degraded_reason=reason if degraded else "",
             cache_hit=cache_hit, hits=len(hits), embed_ms=round(embed_ms, 3), retrieval_ms=round(retrieval_ms, 3),
             model_revision=revision, queries=len(texts))
        given = len(texts) - len(derived)
        return api.SearchResponse(
            hits=hits, mode=first.mode, degraded=degraded, fusion=first.fusion,
            fusion_reason=(first.fusion_reason or None) if not several else
            f"{first.fusion_reason or first.fusion}; queries merged by RRF across queries (k={MERGE_RRF_K})",
            timings=api.SearchTimings(embed_ms=round(embed_ms, 3), retrieval_ms=round(retrieval_ms, 3),
                                      total_ms=round((time.perf_counter() - start) * 1e3, 3), cache_hit=cache_hit),
            queries=[api.QueryLeg(query=text, source="given" if i < given else "derived", mode=out.mode,
                                  degraded=d, cache_hit=f.cache_hit, hits=len(out.hits))
                     for i, (text, f, (out, d)) in enumerate(zip(texts, found, legs, strict=True))]
            if several else None,
            expansion=expansion)

    async def _leg(self, req: api.SearchRequest, text: str, found: Lookup,
                   deadline: Deadline) -> tuple[SearchResult, bool]:
        """One query's search, and whether it degraded (keyword-only because its vector could not be had)."""
        mode, degraded = req.mode, False
        if found.vector is None and req.mode != "keyword" and found.reason != DELEGATED:
            if req.mode == "dense":
                if found.reason == "deadline_exceeded" and deadline.remaining() < 0.01:
                    raise ApiError(504, "deadline_exceeded", "the request deadline passed before the query "
                                   "was embedded", retryable=True)
                raise ApiError(503, "unavailable", f"dense search needs the embedding service ({found.reason})",
                               retryable=True)
            mode, degraded = "keyword", True
            DEGRADED.labels(found.reason if found.reason in REASONS else "unknown").inc()
        async def send(vector: QueryVector | None) -> SearchResult:
            return await self.retrieval.search(req.collection, text, top_k=req.top_k, mode=mode,
                                               filter=req.filter.to_filter() if req.filter else None, vector=vector,
                                               fusion=req.fusion_options(), timeout_s=deadline.check(),
                                               group_by=req.group_by)

        try:
            out = await send(found.vector)
        except MeshClientError as err:
            if found.vector is None or err.code != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            # The collection swapped to another model since its revision was asked: never search with this
            # vector; retrieval embeds the query with the collection's own model instead.
            self.revisions.forget(req.collection)
            out = await send(None)
        return out, degraded or out.degraded


def _hit(h: RetrievedHit, matched: list[int] | None = None) -> api.Hit:
    p = h.passage
    return api.Hit(id=h.id, score=h.score, text=h.text, payload=h.payload, dense_rank=h.dense_rank,
                   keyword_rank=h.keyword_rank, dense_score=None if h.dense_score is None else round(h.dense_score, 6),
                   matched_queries=matched,
                   passage=api.HitPassage(ordinal=p.ordinal, start=p.start, end=p.end, passages=p.passages,
                                          text=p.text) if p is not None else None)


def _key(h: RetrievedHit) -> str:
    """What merging across queries counts as one result: a document, or one passage of it."""
    return h.id if h.passage is None else f"{h.id}\x00{h.passage.ordinal}"


def merge(legs: list[tuple[SearchResult, bool]], top_k: int, k: int = MERGE_RRF_K,
          by_passage: bool = False) -> list[api.Hit]:
    """Reciprocal rank fusion across the queries' legs, best first.

    A document's score is the sum of 1/(k + rank) over the legs that found it; it keeps the text,
    passage and ranks of its best-ranked leg, and names the legs that found it. Grouped by passage,
    each passage counts on its own.
    """
    score: dict[str, float] = {}
    best: dict[str, tuple[int, RetrievedHit]] = {}
    matched: dict[str, list[int]] = {}
    for q, (out, _) in enumerate(legs):
        for rank, h in enumerate(out.hits, 1):
            key = _key(h) if by_passage else h.id
            score[key] = score.get(key, 0.0) + 1.0 / (k + rank)
            matched.setdefault(key, []).append(q)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, h)
    order = sorted(score, key=lambda d: (-score[d], best[d][0], matched[d][0]))[:top_k]
    return [_hit(best[d][1], matched[d]).model_copy(update={"score": round(score[d], 6)}) for d in order]
