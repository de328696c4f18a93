"""Writes and reindexes of one catalog, coordinated so that no acknowledged write is lost.

A reindex copies a snapshot of the live collection into a new one, then swaps the alias. Writes
keep going to the live collection while it runs and are also recorded; the reindex replays the
record into the new collection before it swaps. Two moments exclude writes (a shared/exclusive
gate): when the reindex starts recording (before it reads its snapshot) and the final replay with
the swap. So every acknowledged write is in the snapshot, in the record, or made after the swap
into the new collection, whatever order the engine completes concurrent calls in (a Qdrant server
may reorder them; the embedded engine's single thread does not): the guarantee lives here, not in
the engine.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from services.bootstrap.errors import DependencyUnavailable, Violation


class ReindexInProgress(DependencyUnavailable):
    """A write that cannot be kept while the catalog is rebuilt; UNAVAILABLE, retry after the reindex."""


class WriteGate:
    """Many writers at once, or one exclusive holder that waits for writers in flight and holds new ones."""

    def __init__(self) -> None:
        self._exclusive = asyncio.Lock()
        self._writers = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        """One write (waits while an exclusive holder is in or queued)."""
        async with self._exclusive:  # FIFO: a writer arriving after an exclusive request waits behind it
            pass
        self._writers += 1  # no await between the lock and here: the exclusive side cannot slip in
        self._idle.clear()
        try:
            yield
        finally:
            self._writers -= 1
            if self._writers == 0:
                self._idle.set()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """No write in flight while inside (a reindex starting, or swapping)."""
        async with self._exclusive:
            while self._writers:
                await self._idle.wait()
            yield


@dataclass
class PendingWrites:
    """What was written to a catalog since its reindex took its snapshot, to replay into the new collection.

    ``revision`` is the embedding revision the new collection is built with: only writes embedded
    by it can be replayed (the caller refuses others as retryable). ``layout`` is the new
    collection's: a write prepared in another (the live collection's) is cut and embedded again
    when replayed. Entries are :class:`services.retrieval.prepare.Prepared` documents.
    """

    revision: str
    layout: str = ""
    upserts: dict[str, Any] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def record_upsert(self, prepared: Any) -> None:
        """A document written (the last write of an id wins, as in the store)."""
        self.deleted.discard(prepared.doc_id)
        self.upserts[prepared.doc_id] = prepared

    def record_delete(self, doc_ids: list[str]) -> None:
        """Documents removed."""
        for doc_id in doc_ids:
            self.upserts.pop(doc_id, None)
            self.deleted.add(doc_id)

    def touched(self, doc_id: str) -> bool:
        """Whether the snapshot's copy of ``doc_id`` is stale (the record holds the truth)."""
        return doc_id in self.upserts or doc_id in self.deleted

    def take(self) -> tuple[dict[str, Any], set[str]]:
        """Everything recorded so far; the record starts empty again."""
        upserts, deleted = self.upserts, self.deleted
        self.upserts, self.deleted = {}, set()
        return upserts, deleted

    def __len__(self) -> int:
        return len(self.upserts) + len(self.deleted)


MAX_PAYLOAD_DEPTH = 8  # the gateway's limit too
INT64 = 2**63


def storable_violations(docs: list[Any], fields: dict[str, str]) -> list[Violation]:
    """Payload values the store cannot keep faithfully, each named (``documents[i].payload.<path>``).

    Numbers must be finite (protobuf doubles can carry NaN and infinity; JSON storage cannot),
    declared integer fields must fit in int64 (1e300 or 2**63 used to be stored, and range filters
    then matched wrongly), and nesting stops at ``MAX_PAYLOAD_DEPTH`` levels.
    """
    bad: list[Violation] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > MAX_PAYLOAD_DEPTH:
            bad.append(Violation(path, f"nested deeper than {MAX_PAYLOAD_DEPTH} levels"))
        elif isinstance(value, float) and not math.isfinite(value):
            bad.append(Violation(path, "must be a finite number (no NaN or infinity)"))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]", depth + 1)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}", depth + 1)

    for i, d in enumerate(docs):
        walk(d.payload, f"documents[{i}].payload", 1)
        for name, ftype in fields.items():
            value = d.payload.get(name)
            if ftype == "integer" and isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value) and not -INT64 <= value < INT64:
                bad.append(Violation(f"documents[{i}].payload.{name}", "integer out of the int64 range"))
    return bad
