"""What the retrieval service needs from a vector store, whatever engine is behind it."""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from services.bootstrap.errors import Conflict, NotFound
from services.retrieval.query import Filter

DENSE = "dense"
SPARSE = "bm25"
_ID_NAMESPACE = uuid.UUID("6f1d3c52-6a43-4f4b-9d65-0c1bb2a7d8e1")
_PASSAGE_NAMESPACE = uuid.UUID("0d9c2f7e-4f0b-4c55-a6a1-3d2f1e8b9c40")
# Payload keys of a point besides ``doc_id``, ``text`` (the passage's text) and ``payload`` (the caller's):
ORDINAL, START, END, PASSAGES, DOCUMENT = "ordinal", "start", "end", "passages", "document"
# ``document`` (the whole text) is kept on passage 0 of a document of several passages only, and never
# read by a search leg: the final hits fetch it (a 20,000-character text per passage hit would be 40 MB).
# A versioned collection of a catalog: ``<catalog>__v<milliseconds>`` (create_version names them so).
VERSION_RE = re.compile(r"^(?P<catalog>[a-z0-9][a-z0-9_-]{0,63})__v(?P<ms>[0-9]+)$")


def point_id(doc_id: str) -> str:
    """Deterministic point id of a document id (upserting the same id replaces the point)."""
    return str(uuid.uuid5(_ID_NAMESPACE, doc_id))


def passage_point_id(doc_id: str, ordinal: int) -> str:
    """Point id of passage ``ordinal`` of a document; passage 0 is the document's own id (as before passages).

    Other passages use their own namespace, so no document id can name another document's passage.
    """
    return point_id(doc_id) if ordinal == 0 else str(uuid.uuid5(_PASSAGE_NAMESPACE, f"{ordinal}:{doc_id}"))


@dataclass
class CatalogMeta:
    """What a catalog's vectors were built with, and its filterable fields."""

    name: str
    collection: str
    embedding_revision: str
    analyzer: str
    fields: dict[str, str]
    avg_doc_len: float
    dim: int = 384
    extra: dict[str, Any] = field(default_factory=dict)
    # How documents become points (services/retrieval/passages.py): ``document`` (one point each, every
    # catalog written before passages) or ``passages:<chars>/<overlap>``. A reindex moves a catalog to
    # the service's layout; writes keep the catalog's own.
    layout: str = "document"
    # The version an upgrade (a reindex to another embedding revision) replaced, kept for a rollback
    # until ``previous["until"]`` (unix seconds): the other fields' values of that version, and
    # ``complete`` (false once a write since the upgrade could not be copied into it).
    previous: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        """As stored by a backend."""
        out = {"name": self.name, "collection": self.collection, "embedding_revision": self.embedding_revision,
               "analyzer": self.analyzer, "fields": self.fields, "avg_doc_len": self.avg_doc_len, "dim": self.dim,
               "docs_written": int(self.extra.get("docs_written", 0)), "layout": self.layout}
        if self.previous is not None:
            out["previous"] = self.previous
        return out

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> CatalogMeta:
        """Inverse of :meth:`payload`."""
        return cls(name=p["name"], collection=p["collection"], embedding_revision=p["embedding_revision"],
                   analyzer=p["analyzer"], fields=dict(p["fields"]), avg_doc_len=float(p["avg_doc_len"]),
                   dim=int(p.get("dim", 384)), extra={"docs_written": int(p.get("docs_written", 0))},
                   layout=str(p.get("layout", "document")),
                   previous=dict(p["previous"]) if p.get("previous") else None)


@dataclass
class StoredPoint:
    """A passage as written (a whole document when it is one): id, text, payload, its two vectors and place.

    ``text`` is the passage's; ``start``/``end`` place it in the document (``end`` -1: the whole
    text), ``passages`` is how many the document has, and ``document`` its whole text (passage 0
    of a document of several passages only).
    """

    doc_id: str
    text: str
    payload: dict[str, Any]
    dense: list[float] | None
    sparse_indices: list[int]
    sparse_values: list[float]
    ordinal: int = 0
    start: int = 0
    end: int = -1
    passages: int = 1
    document: str | None = None

    def stored_payload(self) -> dict[str, Any]:
        """The point's payload (engines add their own shadows)."""
        out = {"doc_id": self.doc_id, "text": self.text, "payload": self.payload, ORDINAL: self.ordinal,
               START: self.start, END: len(self.text) if self.end < 0 else self.end, PASSAGES: self.passages}
        if self.document is not None:
            out[DOCUMENT] = self.document
        return out


@dataclass
class StoredDoc:
    """A document read back (reindex)."""

    doc_id: str
    text: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class LegQuery:
    """One query of a search: a single leg (``dense`` / ``sparse``) or both ``fused`` by the engine."""

    kind: str
    limit: int
    filter: Filter
    dense: list[float] | None = None
    sparse_indices: tuple[int, ...] = ()
    sparse_values: tuple[float, ...] = ()
    fusion: str = "rrf"
    rrf_k: int = 60
    prefetch_limit: int = 50
    with_vectors: bool = False


@dataclass
class RawHit:
    """One result of a leg query."""

    doc_id: str
    score: float
    text: str
    payload: dict[str, Any]
    vector: list[float] | None = None
    ordinal: int = 0
    start: int = 0
    end: int = -1  # -1: the whole text (a point written before passages)
    passages: int = 1


def raw_hit(payload: dict[str, Any], point: str, score: float, vector: list[float] | None) -> RawHit:
    """A hit from a stored payload (points written before passages have no place: they are whole documents)."""
    text = payload.get("text", "")
    return RawHit(payload.get("doc_id", point), score, text, payload.get("payload", {}), vector,
                  int(payload.get(ORDINAL, 0)), int(payload.get(START, 0)), int(payload.get(END, len(text))),
                  int(payload.get(PASSAGES, 1)))


class CatalogStore(ABC):
    """Catalogs (aliases over versioned collections) and their documents. Blocking calls."""

    # Whether this process alone uses the store (an embedded engine holds its folder's lock); a Qdrant
    # server may be shared by several workers, whose reindexes in progress look like leftovers.
    exclusive: bool = True

    # ---- primitives each engine implements ------------------------------------------------
    @abstractmethod
    def get_meta(self, name: str) -> CatalogMeta:
        """Metadata of a catalog; NotFound when it does not exist."""

    @abstractmethod
    def put_meta(self, meta: CatalogMeta) -> None:
        """Record (or replace) a catalog's metadata."""

    @abstractmethod
    def create_version(self, name: str, fields: dict[str, str], dim: int) -> str:
        """An empty versioned collection with both vectors and payload indexes; returns its name."""

    @abstractmethod
    def swap_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` atomically."""

    @abstractmethod
    def alias_target(self, alias: str) -> str | None:
        """The collection an alias points at, or None."""

    @abstractmethod
    def drop_collection(self, collection: str) -> None:
        """Delete a versioned collection."""

    @abstractmethod
    def forget_catalog(self, name: str) -> None:
        """Remove a catalog's alias and metadata (its collections stay until dropped)."""

    @abstractmethod
    def list_meta(self) -> list[CatalogMeta]:
        """Metadata of every catalog."""

    @abstractmethod
    def list_collections(self) -> list[str]:
        """Every collection holding catalog data (versioned collections; not the store's own metadata)."""

    @abstractmethod
    def count_points(self, collection: str, later_passages: bool = False) -> int:
        """Exact number of points (``later_passages``: only those of passage 1 or later)."""

    @abstractmethod
    def write_points(self, collection: str, points: list[StoredPoint]) -> None:
        """Write points (idempotent by point id)."""

    @abstractmethod
    def remove_points(self, collection: str, point_ids: list[str]) -> None:
        """Remove points by id; unknown ids are ignored."""

    @abstractmethod
    def payloads(self, collection: str, point_ids: list[str], keys: list[str]) -> dict[str, dict[str, Any]]:
        """The ``keys`` of the payload of each point that exists, by point id."""

    @abstractmethod
    def scroll_points(self, collection: str, batch: int = 256) -> Iterator[list[dict[str, Any]]]:
        """Every point's payload, in pages."""

    @abstractmethod
    def query(self, collection: str, queries: list[LegQuery]) -> list[list[RawHit]]:
        """Run several leg queries in one round trip; results best first."""

    @abstractmethod
    def close(self) -> None:
        """Release the engine."""

    def optimize(self, collection: str) -> None:  # noqa: B027 - a server optimises by itself
        """Merge and index segments after bulk writes (engines that need to be told)."""

    def ping(self) -> None:  # noqa: B027 - embedded engines run in this process: nothing to reach
        """Return when the engine answers; raise otherwise (a server's health probe)."""

    # ---- documents over points (shared logic) ----------------------------------------------
    def count(self, collection: str) -> int:
        """Exact number of documents (points that are a document's first passage)."""
        return self.count_points(collection) - self.count_points(collection, later_passages=True)

    def passage_counts(self, collection: str, doc_ids: list[str]) -> dict[str, int]:
        """How many passages each stored document of ``doc_ids`` has (absent: not stored)."""
        found = self.payloads(collection, [point_id(d) for d in doc_ids], ["doc_id", PASSAGES])
        return {p["doc_id"]: int(p.get(PASSAGES, 1)) for p in found.values() if "doc_id" in p}

    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        """Write documents as their passages; a document written again loses the passages it no longer has."""
        counts = self.passage_counts(collection, sorted({p.doc_id for p in points}))
        self.write_points(collection, points)
        new = {p.doc_id: p.passages for p in points}
        stale = [passage_point_id(d, k) for d, old in counts.items() for k in range(new.get(d, old), old)]
        if stale:
            self.remove_points(collection, stale)

    def delete(self, collection: str, doc_ids: list[str]) -> None:
        """Remove documents (every passage of each) by id; unknown ids are ignored."""
        counts = self.passage_counts(collection, doc_ids)
        ids = [passage_point_id(d, k) for d in doc_ids for k in range(counts.get(d, 1))]
        self.remove_points(collection, ids)

    def document_texts(self, collection: str, doc_ids: list[str]) -> dict[str, str]:
        """The whole text of each stored document of ``doc_ids``."""
        found = self.payloads(collection, [point_id(d) for d in doc_ids], ["doc_id", "text", DOCUMENT])
        return {p["doc_id"]: p.get(DOCUMENT, p.get("text", "")) for p in found.values() if "doc_id" in p}

    def scroll_all(self, collection: str, batch: int = 256) -> Iterator[list[StoredDoc]]:
        """Every stored document (its whole text, read from its first passage), in pages."""
        for page in self.scroll_points(collection, batch):
            yield [StoredDoc(p["doc_id"], p.get(DOCUMENT, p.get("text", "")), p.get("payload", {}))
                   for p in page if "doc_id" in p and int(p.get(ORDINAL, 0)) == 0]

    # ---- shared logic ---------------------------------------------------------------------
    def create_catalog(self, name: str, fields: dict[str, str], embedding_revision: str, analyzer: str,
                       dim: int, avg_doc_len: float, layout: str = "document") -> CatalogMeta:
        """A new versioned collection behind alias ``name``; Conflict when the catalog exists."""
        try:
            self.get_meta(name)
        except NotFound:
            pass
        else:
            raise Conflict(f"collection {name!r} already exists")
        collection = self.create_version(name, fields, dim)
        self.swap_alias(name, collection)
        meta = CatalogMeta(name, collection, embedding_revision, analyzer, fields, avg_doc_len, dim, layout=layout)
        self.put_meta(meta)
        return meta

    def delete_catalog(self, name: str) -> tuple[str, int]:
        """Remove a catalog and its data; (its collection, documents it held). NotFound when unknown.

        The catalog goes first: a crash before its collection is dropped leaves a leftover that the
        next start removes (see :meth:`leftover_collections`), never a catalog without data.
        """
        meta = self.get_meta(name)
        documents = self.count(meta.collection)
        target = self.alias_target(name)
        kept = meta.previous["collection"] if meta.previous else None
        self.forget_catalog(name)
        for collection in {meta.collection, target, kept} - {None}:
            self.drop_collection(collection)  # type: ignore[arg-type]
        return meta.collection, documents

    def leftover_collections(self, catalog: str | None = None) -> list[str]:
        """Versioned collections no catalog uses (``catalog``'s only, when given): a crashed reindex's or create's.

        A collection not named like a version is never one (a shared server may hold others).
        """
        in_use: set[str] = set()
        for meta in self.list_meta():
            in_use.add(meta.collection)
            if meta.previous:  # kept for a rollback
                in_use.add(meta.previous["collection"])
            target = self.alias_target(meta.name)
            if target is not None:
                in_use.add(target)
        out = []
        for collection in self.list_collections():
            match = VERSION_RE.match(collection)
            if match is None or collection in in_use:
                continue
            if catalog is None or match["catalog"] == catalog:
                out.append(collection)
        return sorted(out)
