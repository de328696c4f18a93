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
from services.retrieval.state import REINDEX_EMBED_TEXTS, CatalogState
from services.retrieval.store import CatalogMeta, StoredPoint
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
            async with self.state.gates[name].exclusive():  # writes in flight finish before the snapshot
                meta = await self.state.meta(name)
                pending = self.state.pending[name] = PendingWrites(revision)
            docs: list[tuple[str, str, dict[str, Any]]] = []
            pages = self.state.store.scroll_all(meta.collection)
            while (page := await self.state.run_db(next, pages, None)) is not None:
                docs += [(d.doc_id, d.text, d.payload) for d in page]
            total = len(docs)
            yield {"done": 0, "total": total}
            terms = await self.state.bulk_terms([d[1] for d in docs])
            avg = float(np.mean([max(1, len(t)) for t in terms])) if terms else 64.0
            bm25 = Bm25(self.state.k1, self.state.b, avg)
            new_collection = await self.state.run_db(self.state.store.create_version, name, meta.fields, meta.dim)
            for i in range(0, total, batch_size):
                # Documents written since the snapshot are replayed below; their snapshot copy is stale.
                chunk = [(d, t) for d, t in zip(docs[i:i + batch_size], terms[i:i + batch_size], strict=True)
                         if not pending.touched(d[0])]
                for j in range(0, len(chunk), REINDEX_EMBED_TEXTS):
                    part = chunk[j:j + REINDEX_EMBED_TEXTS]
                    texts = [d[1] for d, _ in part]
                    vectors, got = await self.state.embed(texts, "passage", self.state.embed_timeout_s * 10)
                    if got != revision:
                        raise ReindexInProgress(f"the embedding service changed from revision {revision} to {got} "
                                                "during the reindex; nothing was swapped: retry the reindex")
                    points = []
                    for ((doc_id, text, payload), toks), vec in zip(part, vectors, strict=True):
                        sparse = bm25.document(toks)
                        points.append(StoredPoint(doc_id, text, payload, vec.tolist(), sparse.indices,
                                                  sparse.values))
                    await self.state.run_db(self.state.store.upsert, new_collection, points)
                yield {"done": min(total, i + batch_size), "total": total}
            await self.state.run_db(self.state.store.optimize, new_collection)
            while len(pending) > batch_size:  # replay while writes go on; the last few with the swap
                await self._replay(pending, new_collection, bm25, batch_size)
            async with self.state.gates[name].exclusive():
                await self._replay(pending, new_collection, bm25, batch_size)
                documents = await self.state.run_db(self.state.store.count, new_collection)
                label = self.state.analyzer.info.label()
                new_meta = CatalogMeta(name, new_collection, revision, label, meta.fields, avg, meta.dim,
                                       {"docs_written": documents})
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
                   "documents": documents, "embedding_revision": revision,
                   "total_ns": int((time.perf_counter() - start) * 1e9)}
        finally:
            self.state.reindexing.discard(name)
            self.state.pending.pop(name, None)
            if new_collection is not None:  # failed before the swap: the old collection keeps serving
                await self.state.run_db(self.state.store.drop_collection, new_collection)

    async def _replay(self, pending: PendingWrites, collection: str, bm25: Bm25, batch_size: int) -> None:
        """Write what was recorded since the snapshot into the new collection (vectors as written)."""
        upserts, deleted = pending.take()
        rows = list(upserts.items())
        for i in range(0, len(rows), batch_size):
            points = []
            for doc_id, (text, payload, vector, toks) in rows[i:i + batch_size]:
                sparse = bm25.document(toks)
                points.append(StoredPoint(doc_id, text, payload, vector, sparse.indices, sparse.values))
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
