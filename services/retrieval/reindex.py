"""Blue/green reindex: re-embed into a new collection, replay writes made meanwhile, swap the alias."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from services.bootstrap.errors import FailedPrecondition, InvalidInput, Violation
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import Layout
from services.retrieval.prepare import Prepared, prepare, spans_of
from services.retrieval.state import REINDEX_EMBED_TEXTS, CatalogState
from services.retrieval.store import CatalogMeta
from services.retrieval.store.base import VERSION_RE
from services.retrieval.writes import PendingWrites, ReindexInProgress

log = logging.getLogger(__name__)


class Reindexer:
    """Reindexes and the clean-up of collections an interrupted one left."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state

    async def reindex(self, name: str, batch_size: int = 64) -> AsyncIterator[dict[str, Any]]:
        """Re-embed every document into a new collection, then swap the alias; old stays until then.

        Writes made meanwhile go to the old collection and are replayed into the new one before the
        swap (services/retrieval/writes.py). The work goes to the database and analyser threads in
        slices (a page, a batch), so searches interleave with it instead of queueing behind it.
        """
        meta = await self.state.meta(name)
        if name in self.state.reindexing:
            raise FailedPrecondition(f"collection {name!r} is already being reindexed")
        if not 1 <= batch_size <= 256:
            raise InvalidInput("invalid reindex", [Violation("batch_size", "must be between 1 and 256")])
        self.state.reindexing.add(name)
        start = time.perf_counter()
        new_collection = None
        try:
            await self.drop_leftovers(name)  # what an interrupted reindex of this catalog left
            _, revision = await self.state.embed(["revision probe"], "passage", self.state.embed_timeout_s * 5)
            layout = self.state.layout  # the catalog moves to the service's layout
            async with self.state.gates[name].exclusive():  # writes in flight finish before the snapshot
                meta = await self.state.meta(name)
                pending = self.state.pending[name] = PendingWrites(revision, layout.label())
            docs: list[tuple[str, str, dict[str, Any]]] = []
            pages = self.state.store.scroll_all(meta.collection)
            while (page := await self.state.run_db(next, pages, None)) is not None:
                docs += [(d.doc_id, d.text, d.payload) for d in page]
            total = len(docs)
            yield {"done": 0, "total": total}
            # BM25's average length is over passages; the lengths are known only once analysed, so the
            # keyword weights are made per batch with the running mean and fixed by the last batch's.
            per_doc = await self._terms(docs, layout)
            lengths = [max(1, len(t)) for terms in per_doc.values() for t in terms]
            avg = float(np.mean(lengths)) if lengths else 64.0
            bm25 = Bm25(self.state.k1, self.state.b, avg)
            new_collection = await self.state.run_db(self.state.store.create_version, name, meta.fields, meta.dim)
            for i in range(0, total, batch_size):
                # Documents written since the snapshot are replayed below; their snapshot copy is stale.
                chunk = [d for d in docs[i:i + batch_size] if not pending.touched(d[0])]
                for j in range(0, len(chunk), REINDEX_EMBED_TEXTS):
                    part = chunk[j:j + REINDEX_EMBED_TEXTS]
                    known = [t for d in part for t in per_doc[d[0]]]
                    prepared, got, _, _ = await prepare(self.state, part, layout, terms=known)
                    if part and got != revision:
                        raise ReindexInProgress(f"the embedding service changed from revision {revision} to {got} "
                                                "during the reindex; nothing was swapped: retry the reindex")
                    points = [pt for p in prepared for pt in p.points(bm25)]
                    await self.state.run_db(self.state.store.upsert, new_collection, points)
                yield {"done": min(total, i + batch_size), "total": total}
            await self.state.run_db(self.state.store.optimize, new_collection)
            while len(pending) > batch_size:  # replay while writes go on; the last few with the swap
                await self._replay(pending, new_collection, bm25, batch_size, layout)
            async with self.state.gates[name].exclusive():
                await self._replay(pending, new_collection, bm25, batch_size, layout)
                documents = await self.state.run_db(self.state.store.count, new_collection)
                points = await self.state.run_db(self.state.store.count_points, new_collection)
                label = self.state.analyzer.info.label()
                new_meta = CatalogMeta(name, new_collection, revision, label, meta.fields, avg, meta.dim,
                                       {"docs_written": points}, layout=layout.label())
                await self.state.run_db(self.state.store.swap_alias, name, new_collection)
                await self.state.run_db(self.state.store.put_meta, new_meta)
                self.state.meta_cache[name] = new_meta
                del self.state.pending[name]
                old, new_collection = meta.collection, None
            for _ in range(3000):  # wait (up to ~30 s) for searches still reading the old collection
                if not self.state.inflight.get(old):
                    break
                await asyncio.sleep(0.01)
            await self.state.run_db(self.state.store.drop_collection, old)
            yield {"summary": True, "previous_collection": old, "collection": new_meta.collection,
                   "documents": documents, "embedding_revision": revision, "layout": new_meta.layout,
                   "total_ns": int((time.perf_counter() - start) * 1e9)}
        finally:
            self.state.reindexing.discard(name)
            self.state.pending.pop(name, None)
            if new_collection is not None:  # failed before the swap: the old collection keeps serving
                await self.state.run_db(self.state.store.drop_collection, new_collection)

    async def _terms(self, docs: list[tuple[str, str, dict[str, Any]]],
                     layout: Layout) -> dict[str, list[list[str]]]:
        """Terms of each passage of every document in ``layout``, by document id, analysed in slices."""
        spans = [spans_of(text, layout) for _, text, _ in docs]
        texts = [text[s.start:s.end] for (_, text, _), sp in zip(docs, spans, strict=True) for s in sp]
        terms = await self.state.bulk_terms(texts)
        out, k = {}, 0
        for (doc_id, _, _), sp in zip(docs, spans, strict=True):
            out[doc_id] = terms[k:k + len(sp)]
            k += len(sp)
        return out

    async def _replay(self, pending: PendingWrites, collection: str, bm25: Bm25, batch_size: int,
                      layout: Layout) -> None:
        """Write what was recorded since the snapshot into the new collection (vectors as written).

        A write prepared in the live collection's layout, when the new one differs, is cut and
        embedded again for the new one.
        """
        upserts, deleted = pending.take()
        rows: list[Prepared] = list(upserts.values())
        again = [(p.doc_id, p.text, p.payload) for p in rows if p.layout != layout.label()]
        rows = [p for p in rows if p.layout == layout.label()]
        for i in range(0, len(again), REINDEX_EMBED_TEXTS):
            prepared, got, _, _ = await prepare(self.state, again[i:i + REINDEX_EMBED_TEXTS], layout)
            if got != pending.revision:
                raise ReindexInProgress(f"the embedding service changed from revision {pending.revision} to {got} "
                                        "during the reindex; nothing was swapped: retry the reindex")
            rows += prepared
        for i in range(0, len(rows), batch_size):
            points = [pt for p in rows[i:i + batch_size] for pt in p.points(bm25)]
            await self.state.run_db(self.state.store.upsert, collection, points)
        if deleted:
            await self.state.run_db(self.state.store.delete, collection, sorted(deleted))

    async def drop_leftovers(self, name: str | None = None) -> list[str]:
        """Remove versioned collections no catalog uses (``name``'s only, when given), left by a crash.

        Without ``name`` (at start-up) only on a store this process alone uses: on a shared Qdrant
        server another worker's reindex in progress would look the same.
        """
        if name is None and not self.state.store.exclusive:
            return []
        gone = await self.state.run_db(self.state.store.leftover_collections, name)
        if name is None:  # never a collection this process is building right now
            gone = [c for c in gone if VERSION_RE.match(c)["catalog"] not in self.state.reindexing]  # type: ignore[index]
        for collection in gone:
            await self.state.run_db(self.state.store.drop_collection, collection)
        if gone:
            log.warning("removed %d collection(s) that no catalog uses, left by an interrupted reindex or "
                        "create: %s", len(gone), ", ".join(gone))
        return gone
