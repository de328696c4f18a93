"""What every part of the retrieval service shares.

The store, the analyser, the embedder, their threads, catalog metadata, write gates, the writes a
reindex records and the searches in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, FailedPrecondition, NotFound
from services.retrieval.fusion import ScoredDoc
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.passages import Layout
from services.retrieval.query import check_name
from services.retrieval.store import CatalogMeta, CatalogStore
from services.retrieval.writes import PendingWrites, WriteGate


class Embedder(Protocol):
    """What retrieval needs from the embedding service (implemented over its gRPC client)."""

    async def embed(self, texts: list[str], kind: str, timeout_s: float, revision: str = "") -> tuple[np.ndarray, str]:
        """Vectors and the model revision that made them (``revision``: the one the caller needs, when named)."""
        ...

    async def probe(self) -> None:
        """Return when the embedding service can embed now; raise otherwise (the health monitor's probe)."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


class EmbeddingUnavailable(DependencyUnavailable):
    """The embedding service could not embed in time."""


class RevisionNotServed(EmbeddingUnavailable):
    """No configured embedding instance serves the revision asked for (a search degrades; an upgrade is refused)."""


@dataclass(frozen=True)
class ServedRevision:
    """A model revision one configured embedding instance serves, with its vector size."""

    revision: str
    dim: int
    target: str


class Embedders:
    """The embedding instances retrieval may call: the default (new collections), then one per further model.

    During a model change a collection built with one revision is written and searched with that
    revision's instance, another collection (or the upgrade's new version) with the other's. What
    each instance serves is learned from a one-text probe and from every answer, and asked again
    when an answer names another revision (an instance restarted with another model).
    """

    PROBE = "revision probe"

    def __init__(self, default: Embedder, others: list[Embedder] | None = None) -> None:
        self.all: list[Embedder] = [default, *(others or [])]
        self._served: dict[int, ServedRevision] = {}

    def saw(self, embedder: Embedder, revision: str, dim: int) -> None:
        """Record what ``embedder`` answered with."""
        known = self._served.get(id(embedder))
        if known is None or known.revision != revision or known.dim != dim:
            self._served[id(embedder)] = ServedRevision(revision, dim, getattr(embedder, "target", "in-process"))

    def forget(self, embedder: Embedder) -> None:
        """Probe ``embedder`` again before routing to it (it failed, or may have changed model)."""
        self._served.pop(id(embedder), None)

    async def probe_each(self, timeout_s: float) -> list[ServedRevision | None]:
        """What each instance serves now, in order (None: it did not answer)."""
        async def ask(e: Embedder) -> ServedRevision | None:
            try:
                vecs, revision = await e.embed([self.PROBE], "passage", timeout_s)
            except (DependencyUnavailable, DeadlineExceeded):
                return None
            self.saw(e, revision, int(vecs.shape[1]))
            return self._served[id(e)]

        return list(await asyncio.gather(*(ask(e) for e in self.all)))

    async def served(self, timeout_s: float) -> list[ServedRevision]:
        """What the instances that answer serve, the default first."""
        return [r for r in await self.probe_each(timeout_s) if r is not None]

    async def serving(self, revision: str, timeout_s: float) -> Embedder | None:
        """The instance serving ``revision`` (probed again when none is known to)."""
        for e in self.all:
            known = self._served.get(id(e))
            if known is not None and known.revision == revision:
                return e
        for e, found in zip(self.all, await self.probe_each(timeout_s), strict=True):
            if found is not None and found.revision == revision:
                return e
        return None



# Bulk analysis (ingest, reindex) runs in slices of about this many characters on the analyser's one
# thread, so a search's query analysis waits behind one slice at most (~10-50 ms of Kiwi), not a batch.
BULK_SLICE_CHARS = 2000
# A reindex re-embeds in calls of at most this many texts: a search's query embedding queues behind
# one such call in the embedding service, not behind a whole batch.
REINDEX_EMBED_TEXTS = 16


def left(until: float | None, default: float) -> float:
    """Seconds left before ``until`` (``default`` without a deadline); DeadlineExceeded when none are."""
    if until is None:
        return default
    left = until - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the caller's deadline ran out before the work finished; nothing more was done")
    return min(left, default)


def kept_for_rollback(meta: CatalogMeta) -> bool:
    """Whether the version ``meta``'s last upgrade replaced is kept, complete and in its grace period."""
    prev = meta.previous
    return prev is not None and bool(prev.get("complete", True)) and float(prev.get("until", 0)) > time.time()


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


class CatalogState:
    """The shared state of the retrieval service's parts (one per process)."""

    def __init__(self, store: CatalogStore, analyzer: KoreanAnalyzer, embedder: Embedder, *, dim: int = 384,
                 k1: float = 1.2, b: float = 0.75, embed_timeout_s: float = 2.0, default_fusion: str = "auto",
                 default_rrf_k: int = 60, default_dense_weight: float = 0.5, layout: Layout | None = None,
                 others: list[Embedder] | None = None, grace_s: float = 3600.0, meta_ttl_s: float = 1.0,
                 reader: bool = False) -> None:
        self.store = store
        self.reader = reader
        self.grace_s = grace_s  # how long an upgrade keeps the version it replaced, for a rollback
        # New catalogs, and every catalog a reindex rebuilds, take this layout; writes keep a catalog's own.
        self.layout = layout or Layout()
        self.analyzer = analyzer
        self.embedder = embedder
        self.embedders = Embedders(embedder, others)
        self.dim = dim
        self.k1, self.b = k1, b
        self.embed_timeout_s = embed_timeout_s
        self.default_fusion = default_fusion
        self.default_rrf_k = default_rrf_k
        self.default_dense_weight = default_dense_weight
        self.searcher = HybridSearcher(store)
        self.db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant")
        self.nlp_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kiwi")
        self.reindexing: set[str] = set()
        # Per catalog: writes hold its gate shared; a reindex holds it alone to start recording and to swap.
        self.gates: defaultdict[str, WriteGate] = defaultdict(WriteGate)
        self.pending: dict[str, PendingWrites] = {}  # writes to replay into a reindex's new collection
        # Catalog metadata as last read from the store. A reader re-reads it once older than ``meta_ttl_s``
        # (the writer may swap a catalog's live version at any time); the writer keeps one copy per catalog,
        # which only it changes, so concurrent writes update one object (never two stale copies).
        self.meta_ttl_s = meta_ttl_s
        self.meta_cache: dict[str, CatalogMeta] = {}
        self._meta_read: dict[str, float] = {}
        # Per catalog: held while its metadata's fields are changed and stored (BM25's running mean, a kept
        # version marked incomplete), so two writes never interleave between a change and its store.
        self.meta_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Searches in flight per versioned collection: a reindex drops the old collection only
        # once none still use it (a search may have read the old alias target just before a swap).
        self.inflight: Counter[str] = Counter()

    async def run_db(self, fn, *args):
        """Run ``fn`` on the store's one thread."""
        return await asyncio.get_running_loop().run_in_executor(self.db_thread, fn, *args)

    async def terms(self, texts: list[str]) -> list[list[str]]:
        """Terms of ``texts`` on the analyser's one thread."""
        return await asyncio.get_running_loop().run_in_executor(self.nlp_thread, self.analyzer.terms_batch, texts)

    async def meta(self, name: str, fresh: bool = False) -> CatalogMeta:
        """Catalog metadata: this process's copy, read from the store when it has none.

        A reader reads it again when ``fresh`` or older than ``meta_ttl_s``; the writer's copy is the
        store's (only the writer changes it), so it is read once. NotFound (and the copy forgotten) when
        the catalog no longer exists.
        """
        check_name(name)
        read = self._meta_read.get(name)
        stale = self.reader and (fresh or read is None or time.monotonic() - read >= self.meta_ttl_s)
        if name not in self.meta_cache or stale:
            try:
                meta = await self.run_db(self.store.get_meta, name)
            except NotFound:
                self.forget(name)
                raise
            self.remember(meta)
        return self.meta_cache[name]

    def remember(self, meta: CatalogMeta) -> None:
        """Keep ``meta`` as this process's copy (just written or read)."""
        self.meta_cache[meta.name] = meta
        self._meta_read[meta.name] = time.monotonic()

    def forget(self, name: str) -> None:
        """Drop this process's copy of a catalog's metadata."""
        self.meta_cache.pop(name, None)
        self._meta_read.pop(name, None)

    def check_analyzer(self, meta: CatalogMeta) -> None:
        """Refuse a collection tokenised by another analyser."""
        if meta.analyzer != self.analyzer.info.label():
            raise FailedPrecondition(f"collection {meta.name!r} was tokenised with {meta.analyzer}; this service "
                                     f"uses {self.analyzer.info.label()}: reindex it")

    async def embed(self, texts: list[str], kind: str, timeout_s: float, revision: str = "") -> tuple[np.ndarray, str]:
        """Vectors and their revision; :class:`EmbeddingUnavailable` when they cannot be had in time.

        ``revision`` picks the instance serving it when several are configured (one model change);
        with one instance the caller compares the revision returned, as before.
        """
        embedder, routed = self.embedder, bool(revision and len(self.embedders.all) > 1)
        if routed:
            found = await self.embedders.serving(revision, min(timeout_s, 1.0))
            if found is None:
                raise RevisionNotServed(f"no embedding instance serves revision {revision}")
            embedder = found
        try:
            if routed:  # the request names the revision: an instance that changed model refuses it
                vectors, got = await embedder.embed(texts, kind, timeout_s, revision=revision)
            else:
                vectors, got = await embedder.embed(texts, kind, timeout_s)
        except (DependencyUnavailable, DeadlineExceeded) as exc:
            if routed and isinstance(exc, DependencyUnavailable):
                self.embedders.forget(embedder)  # asked again next time: it may serve another model now
            raise EmbeddingUnavailable(f"embedding service: {exc.message}") from exc
        if len(vectors):
            self.embedders.saw(embedder, got, int(vectors.shape[1]))
        return vectors, got

    async def bulk_terms(self, texts: list[str], until: float | None = None) -> list[list[str]]:
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
            left(until, 1.0)
            out += await self.terms(texts[start:end])
            start = end
        return out

    async def close(self) -> None:
        """Stop the worker threads."""
        # Queued slices are dropped: SIGTERM waits for the one running, not for a whole request's work.
        self.db_thread.shutdown(wait=True, cancel_futures=True)
        self.nlp_thread.shutdown(wait=True, cancel_futures=True)
