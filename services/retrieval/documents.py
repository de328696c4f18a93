"""Document writes: validate, embed, analyse and store a batch (idempotent by id), delete by id."""

from __future__ import annotations

import logging
import time

import numpy as np
from opentelemetry import trace

from services.bootstrap.errors import (
    DependencyUnavailable,
    FailedPrecondition,
    InvalidInput,
    Violation,
)
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.query import (
    Document,
    coerce_payload,
    validate_documents,
)
from services.retrieval.state import REINDEX_EMBED_TEXTS, CatalogState, UpsertOutcome, left
from services.retrieval.store import CatalogMeta, StoredPoint
from services.retrieval.writes import ReindexInProgress, storable_violations

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.retrieval")
WRITE_EMBED_TEXTS = REINDEX_EMBED_TEXTS  # texts per Embed call of a write (16: <= 8k tokens, a few seconds here)


class DocumentWrites:
    """Upserts and deletes, kept in step with a reindex in progress (see services/retrieval/writes.py)."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state

    async def _embed(self, texts: list[str], until: float | None) -> tuple[np.ndarray, str]:
        """Passage vectors in calls of at most ``WRITE_EMBED_TEXTS`` texts, each with its own embedding deadline.

        One call per batch gave 64 long passages (512 tokens each, ~40 s on two cores) one 20 s deadline:
        the batch could never be written, and every retry embedded it again. A call of 16 is bounded work.
        """
        parts, revision = [], ""
        for i in range(0, len(texts), WRITE_EMBED_TEXTS):
            vecs, got = await self.state.embed(texts[i:i + WRITE_EMBED_TEXTS], "passage",
                                               left(until, self.state.embed_timeout_s * 10))
            if revision and got != revision:
                raise DependencyUnavailable(f"the embedding service changed revision ({revision} -> {got}) "
                                            "within one batch; nothing was written: retry it")
            revision = got
            parts.append(vecs)
        return np.concatenate(parts) if len(parts) > 1 else parts[0], revision

    async def upsert(self, name: str, docs: list[Document], deadline_s: float | None = None) -> UpsertOutcome:
        """Validate the whole batch, embed it, tokenise it, write it (idempotent by id).

        The write goes to the collection live when it is stored, not when it began: a reindex may
        swap meanwhile. While one runs, the write is also recorded for its new collection, or
        refused as retryable when it cannot go there (see services/retrieval/writes.py).
        ``deadline_s`` (the caller's remaining time) bounds the work: nothing runs past it.
        """
        until = None if deadline_s is None else time.monotonic() + deadline_s
        meta = await self.state.meta(name)
        self._check_writable(meta)
        validate_documents(docs, meta.fields)
        bad = storable_violations(docs, meta.fields)
        if bad:
            raise InvalidInput(f"{bad[0].field}: {bad[0].description} ({len(bad)} problem(s) in the batch); "
                               "nothing was written", bad)
        t0 = time.perf_counter()
        texts = [d.text for d in docs]
        vectors, revision = await self._embed(texts, until)
        t1 = time.perf_counter()
        terms = await self.state.bulk_terms(texts, until)
        t2 = time.perf_counter()
        async with self.state.gates[name].shared():
            live = await self.state.meta(name)  # a reindex may have swapped while this batch was embedded
            self._check_writable(live, revision, swapped=live is not meta)
            left(until, 1.0)
            live = self._update_avg_len(live, terms)
            bm25 = Bm25(self.state.k1, self.state.b, live.avg_doc_len)
            points = []
            for d, vec, toks in zip(docs, vectors, terms, strict=True):
                sparse = bm25.document(toks)
                points.append(StoredPoint(d.id, d.text, coerce_payload(d.payload, live.fields), vec.tolist(),
                                          sparse.indices, sparse.values))
            await self.state.run_db(self.state.store.upsert, live.collection, points)
            await self.state.run_db(self.state.store.put_meta, live)
            pending = self.state.pending.get(name)
            if pending is not None:
                for p, toks in zip(points, terms, strict=True):
                    pending.record_upsert(p.doc_id, p.text, p.payload, p.dense, toks)
        t3 = time.perf_counter()
        return UpsertOutcome(len(docs), int((t1 - t0) * 1e9), int((t2 - t1) * 1e9), int((t3 - t2) * 1e9))

    def _check_writable(self, meta: CatalogMeta, revision: str | None = None, swapped: bool = False) -> None:
        """Refuse a write the live collection cannot take: retryable while (or because) a reindex changes it."""
        name = meta.name
        pending = self.state.pending.get(name)
        if name in self.state.reindexing or swapped:
            if meta.analyzer != self.state.analyzer.info.label() or (
                    revision is not None and (revision != meta.embedding_revision
                                              or (pending is not None and revision != pending.revision))):
                raise ReindexInProgress(f"collection {name!r} is being reindexed (or just was) and this write "
                                        "cannot be kept in both its old and new collections; retry the write "
                                        "after the reindex finishes")
            return
        self.state.check_analyzer(meta)
        if revision is not None and revision != meta.embedding_revision:
            raise FailedPrecondition(f"collection {name!r} holds vectors of embedding revision "
                                     f"{meta.embedding_revision}; the embedding service serves {revision}: reindex")

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
        await self.state.meta(name)
        bad = [Violation(f"ids[{i}]", "required") for i, d in enumerate(ids) if not d.strip()]
        if not ids:
            bad.append(Violation("ids", "at least one id is required"))
        if bad:
            raise InvalidInput("invalid delete", bad)
        async with self.state.gates[name].shared():
            live = await self.state.meta(name)
            await self.state.run_db(self.state.store.delete, live.collection, ids)
            pending = self.state.pending.get(name)
            if pending is not None:
                pending.record_delete(ids)
        return len(ids)
