"""The retrieval service's logic, free of gRPC: catalogs, writes, hybrid search, reindex."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from opentelemetry import trace

from services.bootstrap.errors import (
    DeadlineExceeded,
    DependencyUnavailable,
    FailedPrecondition,
    InvalidInput,
    Violation,
)
from services.retrieval.hybrid import HybridSearcher, ScoredDoc
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.query import (
    Document,
    SearchQuery,
    check_fields,
    check_name,
    coerce_payload,
    validate_documents,
    validate_search,
)
from services.retrieval.store import CatalogMeta, CatalogStore, StoredPoint

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.retrieval")


class Embedder(Protocol):
    """What retrieval needs from the embedding service (implemented over its gRPC client)."""

    async def embed(self, texts: list[str], kind: str, timeout_s: float) -> tuple[np.ndarray, str]:
        """Vectors and the model revision that made them."""
        ...

    async def probe(self) -> None:
        """Return when the embedding service can embed now; raise otherwise (the health monitor's probe)."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


class EmbeddingUnavailable(DependencyUnavailable):
    """The embedding service could not embed in time."""


@dataclass
class SearchOutcome:
    """Hits and how they were obtained."""

    hits: list[ScoredDoc]
    mode: str
    degraded: bool
    fusion: str | None
    embed_ns: int
    tokenize_ns: int
    search_ns: int
    total_ns: int


@dataclass
class UpsertOutcome:
    """What one batch cost."""

    upserted: int
    embed_ns: int
    tokenize_ns: int
    write_ns: int


class Retriever:
    """Catalog operations over a :class:`CatalogStore`, a Korean analyzer and an embedder."""

    def __init__(self, store: CatalogStore, analyzer: KoreanAnalyzer, embedder: Embedder, *, dim: int = 384,
                 k1: float = 1.2, b: float = 0.75, embed_timeout_s: float = 2.0, default_fusion: str = "rrf",
                 default_rrf_k: int = 60, default_dense_weight: float = 0.5) -> None:
        self.store = store
        self.analyzer = analyzer
        self.embedder = embedder
        self.dim = dim
        self.k1, self.b = k1, b
        self.embed_timeout_s = embed_timeout_s
        self.default_fusion = default_fusion
        self.default_rrf_k = default_rrf_k
        self.default_dense_weight = default_dense_weight
        self.searcher = HybridSearcher(store)
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant")
        self._nlp = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kiwi")
        self._reindexing: set[str] = set()
        self._meta_cache: dict[str, CatalogMeta] = {}
        # Searches in flight per versioned collection: a reindex drops the old collection only
        # once none still use it (a search may have read the old alias target just before a swap).
        self._inflight: Counter[str] = Counter()

    async def _run_db(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    async def _terms(self, texts: list[str]) -> list[list[str]]:
        return await asyncio.get_running_loop().run_in_executor(self._nlp, self.analyzer.terms_batch, texts)

    async def meta(self, name: str) -> CatalogMeta:
        """Catalog metadata (cached; refreshed by writes and reindex)."""
        check_name(name)
        if name not in self._meta_cache:
            self._meta_cache[name] = await self._run_db(self.store.get_meta, name)
        return self._meta_cache[name]

    def _check_analyzer(self, meta: CatalogMeta) -> None:
        if meta.analyzer != self.analyzer.info.label():
            raise FailedPrecondition(f"collection {meta.name!r} was tokenised with {meta.analyzer}; this service "
                                     f"uses {self.analyzer.info.label()}: reindex it")

    # ---- catalogs -------------------------------------------------------------------------
    async def create(self, name: str, fields: dict[str, str]) -> tuple[CatalogMeta, int]:
        """Create a catalog (alias -> versioned collection)."""
        check_name(name)
        check_fields(fields)
        _, revision = await self._embed(["revision probe"], "passage", self.embed_timeout_s * 5)
        meta = await self._run_db(self.store.create_catalog, name, fields, revision, self.analyzer.info.label(),
                                  self.dim, 64.0)
        self._meta_cache[name] = meta
        return meta, 0

    async def describe(self, name: str) -> tuple[CatalogMeta, int]:
        """Metadata and document count."""
        meta = await self.meta(name)
        return meta, await self._run_db(self.store.count, meta.collection)

    # ---- writes ---------------------------------------------------------------------------
    async def _embed(self, texts: list[str], kind: str, timeout_s: float) -> tuple[np.ndarray, str]:
        try:
            return await self.embedder.embed(texts, kind, timeout_s)
        except (DependencyUnavailable, DeadlineExceeded) as exc:
            raise EmbeddingUnavailable(f"embedding service: {exc.message}") from exc

    async def upsert(self, name: str, docs: list[Document]) -> UpsertOutcome:
        """Validate the whole batch, embed it, tokenise it, write it (idempotent by id)."""
        meta = await self.meta(name)
        if name in self._reindexing:
            raise FailedPrecondition(f"collection {name!r} is being reindexed; retry the write after it finishes")
        self._check_analyzer(meta)
        validate_documents(docs, meta.fields)
        t0 = time.perf_counter()
        vectors, revision = await self._embed([d.text for d in docs], "passage", self.embed_timeout_s * 10)
        if revision != meta.embedding_revision:
            raise FailedPrecondition(f"collection {name!r} holds vectors of embedding revision "
                                     f"{meta.embedding_revision}; the embedding service serves {revision}: reindex")
        t1 = time.perf_counter()
        terms = await self._terms([d.text for d in docs])
        t2 = time.perf_counter()
        meta = self._update_avg_len(meta, terms)
        bm25 = Bm25(self.k1, self.b, meta.avg_doc_len)
        points = []
        for d, vec, toks in zip(docs, vectors, terms, strict=True):
            sparse = bm25.document(toks)
            points.append(StoredPoint(d.id, d.text, coerce_payload(d.payload, meta.fields), vec.tolist(),
                                      sparse.indices, sparse.values))
        await self._run_db(self.store.upsert, meta.collection, points)
        await self._run_db(self.store.put_meta, meta)
        t3 = time.perf_counter()
        return UpsertOutcome(len(docs), int((t1 - t0) * 1e9), int((t2 - t1) * 1e9), int((t3 - t2) * 1e9))

    def _update_avg_len(self, meta: CatalogMeta, terms: list[list[str]]) -> CatalogMeta:
        """Running mean document length (BM25's avgdl) over everything written so far."""
        written = int(meta.extra.get("docs_written", 0))
        total = meta.avg_doc_len * written
        batch = sum(max(1, len(t)) for t in terms)
        meta.extra["docs_written"] = written + len(terms)
        meta.avg_doc_len = (total + batch) / (written + len(terms)) if written else batch / len(terms)
        return meta

    async def delete(self, name: str, ids: list[str]) -> int:
        """Remove documents by id (unknown ids are fine)."""
        meta = await self.meta(name)
        bad = [Violation(f"ids[{i}]", "required") for i, d in enumerate(ids) if not d.strip()]
        if not ids:
            bad.append(Violation("ids", "at least one id is required"))
        if bad:
            raise InvalidInput("invalid delete", bad)
        await self._run_db(self.store.delete, meta.collection, ids)
        return len(ids)

    # ---- search ---------------------------------------------------------------------------
    async def search(self, name: str, q: SearchQuery, deadline_s: float | None = None) -> SearchOutcome:
        """Hybrid / dense / keyword search; keyword-only (degraded) when no query vector can be had."""
        start = time.perf_counter()
        meta = await self.meta(name)
        self._inflight[meta.collection] += 1
        try:
            return await self._search(meta, q, deadline_s, start)
        finally:
            self._inflight[meta.collection] -= 1
            if self._inflight[meta.collection] <= 0:
                del self._inflight[meta.collection]

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
        self._check_analyzer(meta)
        validate_search(q, meta.fields, meta.dim)
        mode = q.mode or "hybrid"
        degraded = False
        vector = q.vector
        embed_ns = 0
        if mode in ("hybrid", "dense") and vector is None:
            budget = self.embed_timeout_s if deadline_s is None else min(self.embed_timeout_s, 0.5 * deadline_s)
            t = time.perf_counter()
            stage = TRACER.start_span("retrieval.embed", attributes={"mesh.budget_ms": round(budget * 1e3, 1)})
            try:
                with trace.use_span(stage, end_on_exit=True):
                    vecs, revision = await self._embed([q.text], "query", budget)
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
            terms = (await self._terms([q.text]))[0] if mode != "dense" else []
            sparse = Bm25.query(terms)
        tokenize_ns = int((time.perf_counter() - t) * 1e9)
        t = time.perf_counter()
        # Both legs run in one engine round trip; fusion follows in the same call (hybrid.py).
        with TRACER.start_as_current_span("retrieval.legs_and_fusion", attributes={"mesh.mode": mode}) as span:
            hits = await self._run_db(self.searcher.search, meta.collection, q, mode, vector, sparse)
            span.set_attributes({"mesh.dense_hits": sum(1 for h in hits if h.dense is not None),
                                 "mesh.keyword_hits": sum(1 for h in hits if h.keyword is not None),
                                 "mesh.fusion": q.fusion if mode == "hybrid" else ""})
        search_ns = int((time.perf_counter() - t) * 1e9)
        return SearchOutcome(hits, mode, degraded, q.fusion if mode == "hybrid" else None, embed_ns, tokenize_ns,
                             search_ns, int((time.perf_counter() - start) * 1e9))

    def with_defaults(self, q: SearchQuery, fusion: str | None, rrf_k: int | None,
                      dense_weight: float | None) -> SearchQuery:
        """Fill unset fusion parameters from the service's configured defaults."""
        q.fusion = fusion or self.default_fusion
        q.rrf_k = rrf_k or self.default_rrf_k
        q.dense_weight = self.default_dense_weight if dense_weight is None else dense_weight
        return q

    # ---- reindex --------------------------------------------------------------------------
    async def reindex(self, name: str, batch_size: int = 64) -> AsyncIterator[dict[str, Any]]:
        """Re-embed every document into a new collection, then swap the alias; old stays until then."""
        meta = await self.meta(name)
        if name in self._reindexing:
            raise FailedPrecondition(f"collection {name!r} is already being reindexed")
        if not 1 <= batch_size <= 256:
            raise InvalidInput("invalid reindex", [Violation("batch_size", "must be between 1 and 256")])
        self._reindexing.add(name)
        start = time.perf_counter()
        new_collection = None
        try:
            docs: list[tuple[str, str, dict[str, Any]]] = []
            for page in await self._run_db(lambda: list(self.store.scroll_all(meta.collection))):
                docs += [(d.doc_id, d.text, d.payload) for d in page]
            total = len(docs)
            yield {"done": 0, "total": total}
            terms = await self._terms([d[1] for d in docs])
            avg = float(np.mean([max(1, len(t)) for t in terms])) if terms else 64.0
            bm25 = Bm25(self.k1, self.b, avg)
            new_collection = await self._run_db(self.store.create_version, name, meta.fields, meta.dim)
            revision = meta.embedding_revision
            for i in range(0, total, batch_size):
                chunk = docs[i:i + batch_size]
                vectors, revision = await self._embed([d[1] for d in chunk], "passage", self.embed_timeout_s * 10)
                points = []
                for (doc_id, text, payload), vec, toks in zip(chunk, vectors, terms[i:i + batch_size], strict=True):
                    sparse = bm25.document(toks)
                    points.append(StoredPoint(doc_id, text, payload, vec.tolist(), sparse.indices, sparse.values))
                await self._run_db(self.store.upsert, new_collection, points)
                yield {"done": min(total, i + batch_size), "total": total}
            if hasattr(self.store, "optimize"):
                await self._run_db(self.store.optimize, new_collection)
            new_meta = CatalogMeta(name, new_collection, revision, self.analyzer.info.label(), meta.fields, avg,
                                   meta.dim, {"docs_written": total})
            await self._run_db(self.store.swap_alias, name, new_collection)
            await self._run_db(self.store.put_meta, new_meta)
            self._meta_cache[name] = new_meta
            old, new_collection = meta.collection, None
            for _ in range(3000):  # wait (up to ~30 s) for searches still reading the old collection
                if not self._inflight.get(old):
                    break
                await asyncio.sleep(0.01)
            await self._run_db(self.store.drop_collection, old)
            yield {"summary": True, "previous_collection": old, "collection": new_meta.collection,
                   "documents": total, "embedding_revision": revision,
                   "total_ns": int((time.perf_counter() - start) * 1e9)}
        finally:
            self._reindexing.discard(name)
            if new_collection is not None:  # failed before the swap: the old collection keeps serving
                await self._run_db(self.store.drop_collection, new_collection)

    async def close(self) -> None:
        """Stop the worker threads."""
        self._db.shutdown(wait=True)
        self._nlp.shutdown(wait=True)
