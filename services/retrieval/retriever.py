"""The retrieval service's logic, free of gRPC: catalogs, writes, hybrid search, reindex."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
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
from services.retrieval.store.base import VERSION_RE
from services.retrieval.writes import PendingWrites, ReindexInProgress, WriteGate, storable_violations

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


# Bulk analysis (ingest, reindex) runs in slices of about this many characters on the analyser's one
# thread, so a search's query analysis waits behind one slice at most (~10-50 ms of Kiwi), not a batch.
BULK_SLICE_CHARS = 2000
# A reindex re-embeds in calls of at most this many texts: a search's query embedding queues behind
# one such call in the embedding service, not behind a whole batch.
REINDEX_EMBED_TEXTS = 16


def _left(until: float | None, default: float) -> float:
    """Seconds left before ``until`` (``default`` without a deadline); DeadlineExceeded when none are."""
    if until is None:
        return default
    left = until - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the caller's deadline ran out before the work finished; nothing more was done")
    return min(left, default)


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
    fusion_reason: str = ""


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
                 k1: float = 1.2, b: float = 0.75, embed_timeout_s: float = 2.0, default_fusion: str = "auto",
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
        # Per catalog: writes hold its gate shared; a reindex holds it alone to start recording and to swap.
        self._gates: defaultdict[str, WriteGate] = defaultdict(WriteGate)
        self._pending: dict[str, PendingWrites] = {}  # writes to replay into a reindex's new collection
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

    async def list_catalogs(self) -> list[tuple[CatalogMeta, int]]:
        """Every catalog with its document count, by name."""
        metas = sorted(await self._run_db(self.store.list_meta), key=lambda m: m.name)
        return [(m, await self._run_db(self.store.count, m.collection)) for m in metas]

    async def delete_catalog(self, name: str) -> tuple[str, int]:
        """Remove a catalog and its data: (its versioned collection, documents it held)."""
        await self.meta(name)
        if name in self._reindexing:
            raise FailedPrecondition(f"collection {name!r} is being reindexed; delete it after the reindex finishes")
        async with self._gates[name].exclusive():  # no write in flight; later ones find no catalog
            await self.meta(name)  # NotFound when a concurrent delete won
            self._meta_cache.pop(name, None)
            out = await self._run_db(self.store.delete_catalog, name)
        self._gates.pop(name, None)
        return out

    # ---- writes ---------------------------------------------------------------------------
    async def _embed(self, texts: list[str], kind: str, timeout_s: float) -> tuple[np.ndarray, str]:
        try:
            return await self.embedder.embed(texts, kind, timeout_s)
        except (DependencyUnavailable, DeadlineExceeded) as exc:
            raise EmbeddingUnavailable(f"embedding service: {exc.message}") from exc

    async def upsert(self, name: str, docs: list[Document], deadline_s: float | None = None) -> UpsertOutcome:
        """Validate the whole batch, embed it, tokenise it, write it (idempotent by id).

        The write goes to the collection live when it is stored, not when it began: a reindex may
        swap meanwhile. While one runs, the write is also recorded for its new collection, or
        refused as retryable when it cannot go there (see services/retrieval/writes.py).
        ``deadline_s`` (the caller's remaining time) bounds the work: nothing runs past it.
        """
        until = None if deadline_s is None else time.monotonic() + deadline_s
        meta = await self.meta(name)
        self._check_writable(meta)
        validate_documents(docs, meta.fields)
        bad = storable_violations(docs, meta.fields)
        if bad:
            raise InvalidInput(f"{bad[0].field}: {bad[0].description} ({len(bad)} problem(s) in the batch); "
                               "nothing was written", bad)
        t0 = time.perf_counter()
        texts = [d.text for d in docs]
        vectors, revision = await self._embed(texts, "passage", _left(until, self.embed_timeout_s * 10))
        t1 = time.perf_counter()
        terms = await self._bulk_terms(texts, until)
        t2 = time.perf_counter()
        async with self._gates[name].shared():
            live = await self.meta(name)  # a reindex may have swapped while this batch was embedded
            self._check_writable(live, revision, swapped=live is not meta)
            _left(until, 1.0)
            live = self._update_avg_len(live, terms)
            bm25 = Bm25(self.k1, self.b, live.avg_doc_len)
            points = []
            for d, vec, toks in zip(docs, vectors, terms, strict=True):
                sparse = bm25.document(toks)
                points.append(StoredPoint(d.id, d.text, coerce_payload(d.payload, live.fields), vec.tolist(),
                                          sparse.indices, sparse.values))
            await self._run_db(self.store.upsert, live.collection, points)
            await self._run_db(self.store.put_meta, live)
            pending = self._pending.get(name)
            if pending is not None:
                for p, toks in zip(points, terms, strict=True):
                    pending.record_upsert(p.doc_id, p.text, p.payload, p.dense, toks)
        t3 = time.perf_counter()
        return UpsertOutcome(len(docs), int((t1 - t0) * 1e9), int((t2 - t1) * 1e9), int((t3 - t2) * 1e9))

    def _check_writable(self, meta: CatalogMeta, revision: str | None = None, swapped: bool = False) -> None:
        """Refuse a write the live collection cannot take: retryable while (or because) a reindex changes it."""
        name = meta.name
        pending = self._pending.get(name)
        if name in self._reindexing or swapped:
            if meta.analyzer != self.analyzer.info.label() or (
                    revision is not None and (revision != meta.embedding_revision
                                              or (pending is not None and revision != pending.revision))):
                raise ReindexInProgress(f"collection {name!r} is being reindexed (or just was) and this write "
                                        "cannot be kept in both its old and new collections; retry the write "
                                        "after the reindex finishes")
            return
        self._check_analyzer(meta)
        if revision is not None and revision != meta.embedding_revision:
            raise FailedPrecondition(f"collection {name!r} holds vectors of embedding revision "
                                     f"{meta.embedding_revision}; the embedding service serves {revision}: reindex")

    async def _bulk_terms(self, texts: list[str], until: float | None = None) -> list[list[str]]:
        """Terms of many texts, in slices of about ``BULK_SLICE_CHARS`` characters.

        A search's query, analysed on the same thread, waits for one slice at most, and the caller's
        deadline is checked between slices.
        """
        out: list[list[str]] = []
        start = 0
        while start < len(texts):
            end, size = start, 0
            while end < len(texts) and (end == start or size + len(texts[end]) <= BULK_SLICE_CHARS):
                size += len(texts[end])
                end += 1
            _left(until, 1.0)
            out += await self._terms(texts[start:end])
            start = end
        return out

    def _update_avg_len(self, meta: CatalogMeta, terms: list[list[str]]) -> CatalogMeta:
        """Running mean document length (BM25's avgdl) over everything written so far."""
        written = int(meta.extra.get("docs_written", 0))
        total = meta.avg_doc_len * written
        batch = sum(max(1, len(t)) for t in terms)
        meta.extra["docs_written"] = written + len(terms)
        meta.avg_doc_len = (total + batch) / (written + len(terms)) if written else batch / len(terms)
        return meta

    async def delete(self, name: str, ids: list[str]) -> int:
        """Remove documents by id (unknown ids are fine); from a reindex's new collection too."""
        await self.meta(name)
        bad = [Violation(f"ids[{i}]", "required") for i, d in enumerate(ids) if not d.strip()]
        if not ids:
            bad.append(Violation("ids", "at least one id is required"))
        if bad:
            raise InvalidInput("invalid delete", bad)
        async with self._gates[name].shared():
            live = await self.meta(name)
            await self._run_db(self.store.delete, live.collection, ids)
            pending = self._pending.get(name)
            if pending is not None:
                pending.record_delete(ids)
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
            ranked = await self._run_db(self.searcher.run, meta.collection, q, mode, vector, sparse)
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
        q.fusion = fusion or self.default_fusion
        q.rrf_k = rrf_k or self.default_rrf_k
        q.dense_weight = self.default_dense_weight if dense_weight is None else dense_weight
        return q

    # ---- reindex --------------------------------------------------------------------------
    async def reindex(self, name: str, batch_size: int = 64) -> AsyncIterator[dict[str, Any]]:
        """Re-embed every document into a new collection, then swap the alias; old stays until then.

        Writes made meanwhile go to the old collection and are replayed into the new one before the
        swap (services/retrieval/writes.py). The work goes to the database and analyser threads in
        slices (a page, a batch), so searches interleave with it instead of queueing behind it.
        """
        meta = await self.meta(name)
        if name in self._reindexing:
            raise FailedPrecondition(f"collection {name!r} is already being reindexed")
        if not 1 <= batch_size <= 256:
            raise InvalidInput("invalid reindex", [Violation("batch_size", "must be between 1 and 256")])
        self._reindexing.add(name)
        start = time.perf_counter()
        new_collection = None
        try:
            await self.drop_leftovers(name)  # what an interrupted reindex of this catalog left
            _, revision = await self._embed(["revision probe"], "passage", self.embed_timeout_s * 5)
            async with self._gates[name].exclusive():  # writes in flight finish before the snapshot
                meta = await self.meta(name)
                pending = self._pending[name] = PendingWrites(revision)
            docs: list[tuple[str, str, dict[str, Any]]] = []
            pages = self.store.scroll_all(meta.collection)
            while (page := await self._run_db(next, pages, None)) is not None:
                docs += [(d.doc_id, d.text, d.payload) for d in page]
            total = len(docs)
            yield {"done": 0, "total": total}
            terms = await self._bulk_terms([d[1] for d in docs])
            avg = float(np.mean([max(1, len(t)) for t in terms])) if terms else 64.0
            bm25 = Bm25(self.k1, self.b, avg)
            new_collection = await self._run_db(self.store.create_version, name, meta.fields, meta.dim)
            for i in range(0, total, batch_size):
                # Documents written since the snapshot are replayed below; their snapshot copy is stale.
                chunk = [(d, t) for d, t in zip(docs[i:i + batch_size], terms[i:i + batch_size], strict=True)
                         if not pending.touched(d[0])]
                for j in range(0, len(chunk), REINDEX_EMBED_TEXTS):
                    part = chunk[j:j + REINDEX_EMBED_TEXTS]
                    vectors, got = await self._embed([d[1] for d, _ in part], "passage", self.embed_timeout_s * 10)
                    if got != revision:
                        raise ReindexInProgress(f"the embedding service changed from revision {revision} to {got} "
                                                "during the reindex; nothing was swapped: retry the reindex")
                    points = []
                    for ((doc_id, text, payload), toks), vec in zip(part, vectors, strict=True):
                        sparse = bm25.document(toks)
                        points.append(StoredPoint(doc_id, text, payload, vec.tolist(), sparse.indices,
                                                  sparse.values))
                    await self._run_db(self.store.upsert, new_collection, points)
                yield {"done": min(total, i + batch_size), "total": total}
            await self._run_db(self.store.optimize, new_collection)
            while len(pending) > batch_size:  # replay while writes go on; the last few with the swap
                await self._replay(pending, new_collection, bm25, batch_size)
            async with self._gates[name].exclusive():
                await self._replay(pending, new_collection, bm25, batch_size)
                documents = await self._run_db(self.store.count, new_collection)
                new_meta = CatalogMeta(name, new_collection, revision, self.analyzer.info.label(), meta.fields, avg,
                                       meta.dim, {"docs_written": documents})
                await self._run_db(self.store.swap_alias, name, new_collection)
                await self._run_db(self.store.put_meta, new_meta)
                self._meta_cache[name] = new_meta
                del self._pending[name]
                old, new_collection = meta.collection, None
            for _ in range(3000):  # wait (up to ~30 s) for searches still reading the old collection
                if not self._inflight.get(old):
                    break
                await asyncio.sleep(0.01)
            await self._run_db(self.store.drop_collection, old)
            yield {"summary": True, "previous_collection": old, "collection": new_meta.collection,
                   "documents": documents, "embedding_revision": revision,
                   "total_ns": int((time.perf_counter() - start) * 1e9)}
        finally:
            self._reindexing.discard(name)
            self._pending.pop(name, None)
            if new_collection is not None:  # failed before the swap: the old collection keeps serving
                await self._run_db(self.store.drop_collection, new_collection)

    async def _replay(self, pending: PendingWrites, collection: str, bm25: Bm25, batch_size: int) -> None:
        """Write what was recorded since the snapshot into the new collection (vectors as written)."""
        upserts, deleted = pending.take()
        rows = list(upserts.items())
        for i in range(0, len(rows), batch_size):
            points = []
            for doc_id, (text, payload, vector, toks) in rows[i:i + batch_size]:
                sparse = bm25.document(toks)
                points.append(StoredPoint(doc_id, text, payload, vector, sparse.indices, sparse.values))
            await self._run_db(self.store.upsert, collection, points)
        if deleted:
            await self._run_db(self.store.delete, collection, sorted(deleted))

    async def drop_leftovers(self, name: str | None = None) -> list[str]:
        """Remove versioned collections no catalog uses (``name``'s only, when given), left by a crash.

        Without ``name`` (at start-up) only on a store this process alone uses: on a shared Qdrant
        server another worker's reindex in progress would look the same.
        """
        if name is None and not self.store.exclusive:
            return []
        gone = await self._run_db(self.store.leftover_collections, name)
        if name is None:  # never a collection this process is building right now
            gone = [c for c in gone if VERSION_RE.match(c)["catalog"] not in self._reindexing]  # type: ignore[index]
        for collection in gone:
            await self._run_db(self.store.drop_collection, collection)
        if gone:
            log.warning("removed %d collection(s) that no catalog uses, left by an interrupted reindex or "
                        "create: %s", len(gone), ", ".join(gone))
        return gone

    async def close(self) -> None:
        """Stop the worker threads."""
        # Queued slices are dropped: SIGTERM waits for the one running, not for a whole request's work.
        self._db.shutdown(wait=True, cancel_futures=True)
        self._nlp.shutdown(wait=True, cancel_futures=True)
