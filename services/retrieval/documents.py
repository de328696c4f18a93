"""Document writes: validate, embed, analyse and store a batch (idempotent by id), delete by id."""

from __future__ import annotations

import logging
import time

from opentelemetry import trace

from services.bootstrap.errors import (
    DeadlineExceeded,
    DependencyUnavailable,
    FailedPrecondition,
    InvalidInput,
    Violation,
)
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import Layout
from services.retrieval.prepare import prepare
from services.retrieval.query import (
    Document,
    coerce_payload,
    validate_documents,
)
from services.retrieval.state import CatalogState, UpsertOutcome, kept_for_rollback, left
from services.retrieval.store import CatalogMeta
from services.retrieval.writes import ReindexInProgress, storable_violations

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.retrieval")


class DocumentWrites:
    """Upserts and deletes, kept in step with a reindex in progress (see services/retrieval/writes.py)."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state

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
        layout = Layout.parse(meta.layout)
        rows = [(d.id, d.text, coerce_payload(d.payload, meta.fields)) for d in docs]
        prepared, revision, embed_ns, tokenize_ns = await prepare(self.state, rows, layout, until,
                                                                  revision=meta.embedding_revision)
        t2 = time.perf_counter()
        async with self.state.gates[name].shared():
            live = await self.state.meta(name)  # a reindex may have swapped while this batch was embedded
            self._check_writable(live, revision, swapped=live is not meta)
            left(until, 1.0)
            if live.layout != meta.layout or (live.embedding_revision != meta.embedding_revision
                                              and revision != live.embedding_revision):
                # The swap changed the layout or the model: cut and embed again for the live collection.
                prepared, revision, more_embed, more_tok = await prepare(self.state, rows, Layout.parse(live.layout),
                                                                         until, revision=live.embedding_revision)
                embed_ns, tokenize_ns = embed_ns + more_embed, tokenize_ns + more_tok
                self._check_writable(live, revision)
            # One write at a time changes the running mean and stores it with its points (the store has one
            # thread anyway): two writes never both start from the same count.
            async with self.state.meta_locks[name]:
                before = (live.avg_doc_len, live.extra.get("docs_written", 0))
                live = self._update_avg_len(live, [t for p in prepared for t in p.terms])
                bm25 = Bm25(self.state.k1, self.state.b, live.avg_doc_len)
                points = [pt for p in prepared for pt in p.points(bm25)]
                try:
                    await self.state.run_db(self.state.store.upsert, live.collection, points)
                    await self.state.run_db(self.state.store.put_meta, live)
                except BaseException:
                    live.avg_doc_len, live.extra["docs_written"] = before  # nothing written: nothing counted
                    raise
            pending = self.state.pending.get(name)
            if pending is not None:
                for p in prepared:
                    pending.record_upsert(p)
            if kept_for_rollback(live):
                embed_ns += await self._copy_to_previous(live, rows, until)
        t3 = time.perf_counter()
        return UpsertOutcome(len(docs), embed_ns, tokenize_ns, int((t3 - t2) * 1e9))

    async def _copy_to_previous(self, live: CatalogMeta, rows: list, until: float | None) -> int:
        """Write ``rows`` into the version an upgrade replaced too, embedded by its model, so a rollback loses nothing.

        When that cannot be done (its model's instance is gone), the kept version is marked incomplete:
        a rollback is then refused rather than losing this write. Returns the embedding time (ns).
        """
        prev = live.previous
        assert prev is not None
        t = time.perf_counter()
        try:
            prepared, revision, _, _ = await prepare(self.state, rows, Layout.parse(prev["layout"]), until,
                                                     revision=prev["embedding_revision"])
            if revision != prev["embedding_revision"]:
                raise DependencyUnavailable(f"the previous model's revision {prev['embedding_revision']} is not "
                                            f"served (got {revision})")
            bm25 = Bm25(self.state.k1, self.state.b, float(prev["avg_doc_len"]))
            points = [pt for p in prepared for pt in p.points(bm25)]
            await self.state.run_db(self.state.store.upsert, prev["collection"], points)
        except (DependencyUnavailable, DeadlineExceeded) as exc:
            log.warning("collection %r: a write since its upgrade could not be copied into the replaced version "
                        "(%s); a rollback is no longer possible", live.name, exc.message)
            async with self.state.meta_locks[live.name]:
                prev["complete"] = False
                await self.state.run_db(self.state.store.put_meta, live)
        return int((time.perf_counter() - t) * 1e9)

    def _check_writable(self, meta: CatalogMeta, revision: str | None = None, swapped: bool = False) -> None:
        """Refuse a write the live collection cannot take: retryable while (or because) a reindex changes it."""
        name = meta.name
        if name in self.state.reindexing or swapped:
            if meta.analyzer != self.state.analyzer.info.label() or (
                    revision is not None and revision != meta.embedding_revision and not swapped):
                raise ReindexInProgress(f"collection {name!r} is being reindexed (or just was) and this write "
                                        "cannot be kept in both its old and new collections; retry the write "
                                        "after the reindex finishes")
            return
        self.state.check_analyzer(meta)
        if revision is not None and revision != meta.embedding_revision:
            raise FailedPrecondition(f"collection {name!r} holds vectors of embedding revision "
                                     f"{meta.embedding_revision}; the embedding service serves {revision}: reindex")

    def _update_avg_len(self, meta: CatalogMeta, terms: list[list[str]]) -> CatalogMeta:
        """Running mean passage length (BM25's avgdl) over everything written so far (a passage is BM25's document)."""
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
            if kept_for_rollback(live):
                await self.state.run_db(self.state.store.delete, live.previous["collection"], ids)  # type: ignore[index]
            pending = self.state.pending.get(name)
            if pending is not None:
                pending.record_delete(ids)
        return len(ids)
