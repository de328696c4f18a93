"""Blue/green reindex: re-embed into a new collection, replay writes made meanwhile, swap the alias."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.bootstrap.errors import FailedPrecondition, Violation
from services.retrieval.gate import Gate, GateRefused, GateResult, K, check_gate, invalid, judge, unknown_documents
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import Layout
from services.retrieval.prepare import Prepared, prepare, spans_of
from services.retrieval.query import SearchQuery
from services.retrieval.search import CatalogSearch
from services.retrieval.state import REINDEX_EMBED_TEXTS, CatalogState, EmbeddingUnavailable
from services.retrieval.store import CatalogMeta
from services.retrieval.store.base import VERSION_RE
from services.retrieval.writes import PendingWrites, ReindexInProgress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """What a reindex builds: the model revision (another than the collection's: an upgrade), its size, the gate."""

    revision: str
    dim: int
    upgrade: bool
    gate: Gate | None
    grace_s: float


class Reindexer:
    """Reindexes (same model, or an upgrade to another behind a quality gate), rollbacks, and clean-up."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state
        self.searches = CatalogSearch(state)

    async def plan(self, name: str, batch_size: int = 64, revision: str = "", gate: Gate | None = None,
                   grace_s: float = 0.0) -> Plan:
        """Check a reindex request (every problem at once) and say what it will build; nothing is changed.

        An unknown collection is NOT_FOUND; a revision no configured embedding instance serves, a bad
        gate, or a gate naming documents the collection does not hold are INVALID_ARGUMENT.
        """
        meta = await self.state.meta(name)
        bad: list[Violation] = []
        if not 1 <= batch_size <= 256:
            bad.append(Violation("batch_size", "must be between 1 and 256"))
        if not (math.isfinite(grace_s) and 0 <= grace_s <= 30 * 86400):
            bad.append(Violation("grace_s", "between 0 and 30 days (0: the service's setting)"))
        each = await self.state.embedders.probe_each(self.state.embed_timeout_s * 5)
        served = [r for r in each if r is not None]
        if revision:
            found = next((r for r in served if r.revision == revision), None)
            if found is None:
                names = ", ".join(r.revision for r in served) or "none answers now"
                bad.append(Violation("embedding_revision", f"no embedding instance serves revision {revision!r} "
                                                           f"(served: {names})"))
        else:
            found = each[0]  # the default instance: a same-model rebuild, or an upgrade to what it serves now
            if found is None:
                raise EmbeddingUnavailable("the embedding service did not answer: nothing to reindex with")
        if gate is not None:
            bad += check_gate(gate)
            if not bad:
                ids = sorted({d for q in gate.queries for d in q.relevant_ids})
                known = await self.state.run_db(self.state.store.document_texts, meta.collection, ids)
                bad += unknown_documents(gate, set(known))
        if bad:
            raise invalid(bad)
        assert found is not None
        upgrade = found.revision != meta.embedding_revision
        if gate is not None and not upgrade:
            gate = None  # the same model: nothing for a gate to judge
        return Plan(found.revision, found.dim, upgrade, gate, grace_s or self.state.grace_s)

    async def reindex(self, name: str, batch_size: int = 64, revision: str = "", gate: Gate | None = None,
                      grace_s: float = 0.0) -> AsyncIterator[dict[str, Any]]:
        """Re-embed every document into a new collection, then swap the alias; old stays until then.

        Writes made meanwhile go to the old collection and are replayed into the new one before the
        swap (services/retrieval/writes.py). The work goes to the database and analyser threads in
        slices (a page, a batch), so searches interleave with it instead of queueing behind it.

        With ``revision`` another than the collection's it is an upgrade: the new version is built
        with that model, judged by ``gate`` against the old one before the swap (refused: the job ends
        with :class:`GateRefused` and the old version keeps serving), and the old version is kept for
        a rollback for ``grace_s`` seconds (the service's setting when 0), written along meanwhile.
        """
        await self.state.meta(name)
        if name in self.state.reindexing:
            raise FailedPrecondition(f"collection {name!r} is already being reindexed")
        plan = await self.plan(name, batch_size, revision, gate, grace_s)
        revision = plan.revision
        self.state.reindexing.add(name)
        start = time.perf_counter()
        new_collection = None
        try:
            await self.drop_leftovers(name)  # what an interrupted reindex of this catalog left
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
            new_collection = await self.state.run_db(self.state.store.create_version, name, meta.fields, plan.dim)
            for i in range(0, total, batch_size):
                # Documents written since the snapshot are replayed below; their snapshot copy is stale.
                chunk = [d for d in docs[i:i + batch_size] if not pending.touched(d[0])]
                for j in range(0, len(chunk), REINDEX_EMBED_TEXTS):
                    part = chunk[j:j + REINDEX_EMBED_TEXTS]
                    known = [t for d in part for t in per_doc[d[0]]]
                    prepared, got, _, _ = await prepare(self.state, part, layout, terms=known, revision=revision)
                    if part and got != revision:
                        raise ReindexInProgress(f"the embedding service changed from revision {revision} to {got} "
                                                "during the reindex; nothing was swapped: retry the reindex")
                    points = [pt for p in prepared for pt in p.points(bm25)]
                    await self.state.run_db(self.state.store.upsert, new_collection, points)
                yield {"done": min(total, i + batch_size), "total": total}
            await self.state.run_db(self.state.store.optimize, new_collection)
            while len(pending) > batch_size:  # replay while writes go on; the last few with the swap
                await self._replay(pending, new_collection, bm25, batch_size, layout)
            verdict = None
            if plan.gate is not None:
                fresh = CatalogMeta(name, new_collection, revision, self.state.analyzer.info.label(), meta.fields,
                                    avg, plan.dim, layout=layout.label())
                verdict = await self._judge(plan.gate, meta, fresh)
                yield {"gate": verdict}
                log.log(logging.INFO if verdict.passed else logging.WARNING, "collection %r: the quality gate %s the "
                        "upgrade to %s: %s", name, "passed" if verdict.passed else "refused", revision,
                        verdict.summary())
                if not verdict.passed:
                    raise GateRefused(f"quality gate refused the upgrade of {name!r}: {verdict.summary()}; "
                                      f"{meta.collection} keeps serving")
            async with self.state.gates[name].exclusive():
                await self._replay(pending, new_collection, bm25, batch_size, layout)
                meta = await self.state.meta(name)
                documents = await self.state.run_db(self.state.store.count, new_collection)
                points = await self.state.run_db(self.state.store.count_points, new_collection)
                label = self.state.analyzer.info.label()
                new_meta = CatalogMeta(name, new_collection, revision, label, meta.fields, avg, plan.dim,
                                       {"docs_written": points}, layout=layout.label(), previous=meta.previous)
                drop = [meta.collection]
                if plan.upgrade and plan.grace_s > 0:  # keep the replaced version (only it) for a rollback
                    drop = [meta.previous["collection"]] if meta.previous else []
                    new_meta.previous = {
                        "collection": meta.collection, "embedding_revision": meta.embedding_revision,
                        "analyzer": meta.analyzer, "layout": meta.layout, "avg_doc_len": meta.avg_doc_len,
                        "dim": meta.dim, "docs_written": int(meta.extra.get("docs_written", 0)),
                        "until": time.time() + plan.grace_s, "complete": True}
                elif plan.upgrade and meta.previous:  # nothing kept: the older kept version goes too
                    drop.append(meta.previous["collection"])
                    new_meta.previous = None
                await self.state.run_db(self.state.store.swap_alias, name, new_collection)
                await self.state.run_db(self.state.store.put_meta, new_meta)
                self.state.remember(new_meta)
                del self.state.pending[name]
                old, new_collection = meta.collection, None
            for collection in drop:
                await self._drop_when_unused(collection)
            kept = new_meta.previous or {}
            yield {"summary": True, "previous_collection": old, "collection": new_meta.collection,
                   "documents": documents, "embedding_revision": revision, "layout": new_meta.layout,
                   "total_ns": int((time.perf_counter() - start) * 1e9), "gate": verdict,
                   "kept_collection": kept.get("collection", ""), "rollback_until": float(kept.get("until", 0.0))}
        finally:
            self.state.reindexing.discard(name)
            self.state.pending.pop(name, None)
            if new_collection is not None:  # failed before the swap: the old collection keeps serving
                await self.state.run_db(self.state.store.drop_collection, new_collection)

    async def _drop_when_unused(self, collection: str) -> None:
        for _ in range(3000):  # wait (up to ~30 s) for searches still reading the collection
            if not self.state.inflight.get(collection):
                break
            await asyncio.sleep(0.01)
        await self.state.run_db(self.state.store.drop_collection, collection)

    async def _judge(self, gate: Gate, old: CatalogMeta, new: CatalogMeta) -> GateResult:
        """Both versions' figures on the gate's queries (a search that cannot embed stops the reindex)."""
        async def ranked(meta: CatalogMeta, text: str) -> list[str]:
            q = self.searches.with_defaults(SearchQuery(text=text, top_k=K, mode=gate.mode), None, None, None)
            self.state.inflight[meta.collection] += 1
            try:
                out = await self.searches.run(meta, q, None)
            finally:
                self.state.inflight[meta.collection] -= 1
                if self.state.inflight[meta.collection] <= 0:
                    del self.state.inflight[meta.collection]
            if out.degraded:
                raise EmbeddingUnavailable(f"the quality gate could not embed with revision {meta.embedding_revision}: "
                                           "nothing was swapped; retry the reindex when its instance answers")
            return [h.doc_id for h in out.hits]

        return await judge(gate, lambda t: ranked(old, t), lambda t: ranked(new, t), old.embedding_revision,
                           new.embedding_revision)

    async def rollback(self, name: str) -> tuple[CatalogMeta, int, str]:
        """Point ``name`` back at the version its last upgrade replaced: (its metadata, documents, removed version).

        Nothing is re-embedded: the kept version was written along since the upgrade. Refused
        (FAILED_PRECONDITION) while a reindex runs, when nothing is kept, after the grace period, when a
        write since the upgrade could not be copied into it, or when no instance serves its model.
        """
        meta = await self.state.meta(name)
        if name in self.state.reindexing:
            raise FailedPrecondition(f"collection {name!r} is being reindexed; roll back after it finishes")
        prev = meta.previous
        if prev is None:
            raise FailedPrecondition(f"collection {name!r} has no previous version to roll back to (none was kept, "
                                     "or its grace period ended)")
        if float(prev.get("until", 0)) <= time.time():
            await self.expire_kept(name)
            raise FailedPrecondition(f"the grace period of {name!r}'s previous version ended; it was removed")
        if not prev.get("complete", True):
            raise FailedPrecondition(f"a write to {name!r} since its upgrade could not be copied into the previous "
                                     "version; rolling back would lose it: reindex to that revision instead")
        if await self.state.embedders.serving(prev["embedding_revision"], self.state.embed_timeout_s) is None \
                and len(self.state.embedders.all) > 1:
            raise FailedPrecondition(f"no embedding instance serves the previous revision {prev['embedding_revision']}"
                                     ": start it, then roll back")
        async with self.state.gates[name].exclusive():
            meta = await self.state.meta(name)
            prev = meta.previous
            if prev is None:
                raise FailedPrecondition(f"collection {name!r} has no previous version to roll back to")
            if not prev.get("complete", True):  # a write that finished after the check above could not be copied
                raise FailedPrecondition(f"a write to {name!r} since its upgrade could not be copied into the "
                                         "previous version; rolling back would lose it: reindex to that revision "
                                         "instead")
            back = CatalogMeta(name, prev["collection"], prev["embedding_revision"], prev["analyzer"], meta.fields,
                               float(prev["avg_doc_len"]), int(prev["dim"]),
                               {"docs_written": int(prev.get("docs_written", 0))}, layout=prev["layout"])
            await self.state.run_db(self.state.store.swap_alias, name, back.collection)
            await self.state.run_db(self.state.store.put_meta, back)
            self.state.remember(back)
        await self._drop_when_unused(meta.collection)
        log.info("collection %r rolled back to %s (revision %s); %s removed", name, back.collection,
                 back.embedding_revision, meta.collection)
        return back, await self.state.run_db(self.state.store.count, back.collection), meta.collection

    async def expire_kept(self, name: str | None = None) -> list[str]:
        """Remove the versions kept for a rollback whose grace period ended (``name``'s only, when given)."""
        metas = [await self.state.meta(name)] if name else await self.state.run_db(self.state.store.list_meta)
        gone = []
        for m in metas:
            if m.previous is None or float(m.previous.get("until", 0)) > time.time() or m.name in self.state.reindexing:
                continue
            async with self.state.gates[m.name].exclusive():
                live = await self.state.run_db(self.state.store.get_meta, m.name)
                if live.previous is None or float(live.previous.get("until", 0)) > time.time():
                    continue
                kept = live.previous["collection"]
                live.previous = None
                await self.state.run_db(self.state.store.put_meta, live)
                self.state.remember(live)
            await self._drop_when_unused(kept)
            gone.append(kept)
            log.info("collection %r: the version kept for a rollback (%s) was removed at the end of its grace period",
                     m.name, kept)
        return gone

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

        A write prepared in the live collection's layout or by its model, when the new one's differ, is
        cut and embedded again for the new one.
        """
        upserts, deleted = pending.take()
        rows: list[Prepared] = list(upserts.values())

        def fits(p: Prepared) -> bool:
            return p.layout == layout.label() and p.revision == pending.revision

        again = [(p.doc_id, p.text, p.payload) for p in rows if not fits(p)]
        rows = [p for p in rows if fits(p)]
        for i in range(0, len(again), REINDEX_EMBED_TEXTS):
            prepared, got, _, _ = await prepare(self.state, again[i:i + REINDEX_EMBED_TEXTS], layout,
                                                revision=pending.revision)
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
