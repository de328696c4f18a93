"""Search: a query vector from the one owner (cache, breaker, budget), then retrieval; keyword-only when it fails."""

from __future__ import annotations

import time

from opentelemetry import trace
from prometheus_client import Counter

from clients.retrieval import AsyncRetrievalClient
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.http.telemetry import note
from gateway.search import protocol as api
from gateway.vectors.query import Lookup, QueryVectors

TRACER = trace.get_tracer("gateway")
DEGRADED = Counter("mesh_gateway_search_degraded", "searches answered keyword-only", ["reason"])
REASONS = ("breaker_open", "unavailable", "deadline_exceeded", "resource_exhausted", "unknown")
for _reason in REASONS:
    DEGRADED.labels(_reason)  # every series exists from the start


class Search:
    """Composes the query vector and retrieval for ``POST /v1/search`` (and the recommendation routes)."""

    def __init__(self, vectors: QueryVectors, retrieval: AsyncRetrievalClient) -> None:
        self.vectors = vectors
        self.retrieval = retrieval

    async def _vector(self, req: api.SearchRequest, deadline: Deadline) -> Lookup:
        if req.mode == "keyword":
            return Lookup(None, 0.0, False, "")
        with TRACER.start_as_current_span("gateway.query_vector") as span:
            found = await self.vectors.lookup(req.query, deadline)
            span.set_attributes({"mesh.cache_hit": found.cache_hit, "mesh.degraded_reason": found.reason,
                                 "mesh.breaker": self.vectors.breaker.state})
        return found

    async def search(self, req: api.SearchRequest, deadline: Deadline) -> api.SearchResponse:
        """Run one search within ``deadline``."""
        start = time.perf_counter()
        found = await self._vector(req, deadline)
        mode, degraded = req.mode, False
        if found.vector is None and req.mode != "keyword":
            if req.mode == "dense":
                if found.reason == "deadline_exceeded" and deadline.remaining() < 0.01:
                    raise ApiError(504, "deadline_exceeded", "the request deadline passed before the query "
                                   "was embedded", retryable=True)
                raise ApiError(503, "unavailable", f"dense search needs the embedding service ({found.reason})",
                               retryable=True)
            mode, degraded = "keyword", True
            DEGRADED.labels(found.reason if found.reason in REASONS else "unknown").inc()
        t = time.perf_counter()
        out = await self.retrieval.search(req.collection, req.query, top_k=req.top_k, mode=mode,
                                          filter=req.filter.to_filter() if req.filter else None, vector=found.vector,
                                          fusion=req.fusion_options(), timeout_s=deadline.check())
        retrieval_ms = (time.perf_counter() - t) * 1e3
        degraded = degraded or out.degraded
        note(collection=req.collection, mode=out.mode, degraded=degraded,
             degraded_reason=found.reason if degraded else "", cache_hit=found.cache_hit, hits=len(out.hits),
             embed_ms=round(found.ms, 3), retrieval_ms=round(retrieval_ms, 3),
             model_revision=found.vector.revision if found.vector else self.vectors.revision)
        return api.SearchResponse(
            hits=[api.Hit(id=h.id, score=h.score, text=h.text, payload=h.payload, dense_rank=h.dense_rank,
                          keyword_rank=h.keyword_rank) for h in out.hits],
            mode=out.mode, degraded=degraded, fusion=out.fusion, fusion_reason=out.fusion_reason or None,
            timings=api.SearchTimings(embed_ms=round(found.ms, 3), retrieval_ms=round(retrieval_ms, 3),
                                      total_ms=round((time.perf_counter() - start) * 1e3, 3),
                                      cache_hit=found.cache_hit))
