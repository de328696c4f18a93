"""Catalog storage on Qdrant: one code path for ``:memory:``, a local path, or a server URL.

Each catalog is an alias pointing at a versioned collection with a ``dense`` vector (cosine) and
a ``bm25`` sparse vector (Qdrant's IDF modifier). What built the vectors (embedding revision,
Korean analyzer) is recorded in a small metadata collection, so a mismatch can be refused.
Calls are blocking; the service runs them on one worker thread (local mode is not thread-safe).
"""

from __future__ import annotations

import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import QdrantClient, models

from services.bootstrap.errors import Conflict, NotFound

DENSE = "dense"
SPARSE = "bm25"
META_COLLECTION = "_mesh_catalogs"
_ID_NAMESPACE = uuid.UUID("6f1d3c52-6a43-4f4b-9d65-0c1bb2a7d8e1")
_META_VECTOR = "none"

FIELD_SCHEMAS = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "bool": models.PayloadSchemaType.BOOL,
}


def point_id(doc_id: str) -> str:
    """Deterministic point id of a document id (upserting the same id replaces the point)."""
    return str(uuid.uuid5(_ID_NAMESPACE, doc_id))


def open_qdrant(location: str, timeout_s: float = 10.0) -> QdrantClient:
    """``:memory:``, ``http(s)://host:port`` (a server or cluster), or a folder (persistent local mode)."""
    if location == ":memory:":
        return QdrantClient(location=":memory:")
    if location.startswith(("http://", "https://")):
        return QdrantClient(url=location, timeout=int(max(1, timeout_s)))
    return QdrantClient(path=location)


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

    def payload(self) -> dict[str, Any]:
        """As stored in the metadata collection."""
        return {"name": self.name, "collection": self.collection, "embedding_revision": self.embedding_revision,
                "analyzer": self.analyzer, "fields": self.fields, "avg_doc_len": self.avg_doc_len, "dim": self.dim,
                "docs_written": int(self.extra.get("docs_written", 0))}


@dataclass
class StoredPoint:
    """A document as written: id, text, payload and its two vectors."""

    doc_id: str
    text: str
    payload: dict[str, Any]
    dense: list[float] | None
    sparse_indices: list[int]
    sparse_values: list[float]


class CatalogStore:
    """Qdrant operations the retrieval service needs, addressed by catalog alias."""

    def __init__(self, client: QdrantClient) -> None:
        self.client = client
        if not self.client.collection_exists(META_COLLECTION):
            self.client.create_collection(META_COLLECTION, vectors_config={
                _META_VECTOR: models.VectorParams(size=1, distance=models.Distance.DOT)})

    # ---- catalogs -------------------------------------------------------------------------
    def get_meta(self, name: str) -> CatalogMeta:
        """Metadata of the catalog ``name``; NotFound when it does not exist."""
        found = self.client.retrieve(META_COLLECTION, [point_id(name)], with_payload=True)
        if not found:
            raise NotFound(f"collection {name!r} does not exist")
        p = dict(found[0].payload or {})
        return CatalogMeta(name=p["name"], collection=p["collection"], embedding_revision=p["embedding_revision"],
                           analyzer=p["analyzer"], fields=dict(p["fields"]), avg_doc_len=float(p["avg_doc_len"]),
                           dim=int(p.get("dim", 384)), extra={"docs_written": int(p.get("docs_written", 0))})

    def put_meta(self, meta: CatalogMeta) -> None:
        """Record (or replace) a catalog's metadata."""
        self.client.upsert(META_COLLECTION, points=[models.PointStruct(
            id=point_id(meta.name), vector={_META_VECTOR: [0.0]}, payload=meta.payload())], wait=True)

    def create_catalog(self, name: str, fields: dict[str, str], embedding_revision: str, analyzer: str,
                       dim: int, avg_doc_len: float) -> CatalogMeta:
        """A new versioned collection behind alias ``name``; Conflict when the catalog exists."""
        try:
            self.get_meta(name)
        except NotFound:
            pass
        else:
            raise Conflict(f"collection {name!r} already exists")
        collection = self.create_version(name, fields, dim)
        self.swap_alias(name, collection)
        meta = CatalogMeta(name, collection, embedding_revision, analyzer, fields, avg_doc_len, dim)
        self.put_meta(meta)
        return meta

    def create_version(self, name: str, fields: dict[str, str], dim: int) -> str:
        """An empty collection ``<name>__v<ms>`` with both vectors and payload indexes."""
        collection = f"{name}__v{time.time_ns() // 1_000_000}"
        self.client.create_collection(
            collection,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        with warnings.catch_warnings():
            # Local mode filters without indexes and says so; a server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for fname, ftype in fields.items():
                self.client.create_payload_index(collection, f"payload.{fname}", field_schema=FIELD_SCHEMAS[ftype])
        return collection

    def swap_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection`` in one atomic alias operation."""
        ops: list[Any] = []
        current = self.alias_target(alias)
        if current is not None:
            ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=collection,
                                                                              alias_name=alias)))
        self.client.update_collection_aliases(change_aliases_operations=ops)

    def alias_target(self, alias: str) -> str | None:
        """The collection an alias points at, or None."""
        for a in self.client.get_aliases().aliases:
            if a.alias_name == alias:
                return a.collection_name
        return None

    def drop_collection(self, collection: str) -> None:
        """Delete a versioned collection (after a swap, or a failed reindex)."""
        if self.client.collection_exists(collection):
            self.client.delete_collection(collection)

    def count(self, collection: str) -> int:
        """Exact number of documents."""
        return self.client.count(collection, exact=True).count

    # ---- documents ------------------------------------------------------------------------
    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        """Write points (idempotent by document id)."""
        self.client.upsert(collection, wait=True, points=[
            models.PointStruct(
                id=point_id(p.doc_id),
                vector={
                    **({DENSE: p.dense} if p.dense is not None else {}),
                    SPARSE: models.SparseVector(indices=p.sparse_indices, values=p.sparse_values),
                },
                payload={"doc_id": p.doc_id, "text": p.text, "payload": p.payload},
            ) for p in points])

    def delete(self, collection: str, doc_ids: list[str]) -> None:
        """Remove documents by id; unknown ids are ignored."""
        self.client.delete(collection, points_selector=models.PointIdsList(points=[point_id(d) for d in doc_ids]),
                           wait=True)

    def scroll_all(self, collection: str, batch: int = 256):
        """Every stored document (id, text, payload, sparse vector), in pages."""
        offset = None
        while True:
            points, offset = self.client.scroll(collection, limit=batch, offset=offset, with_payload=True,
                                                with_vectors=[SPARSE])
            yield points
            if offset is None:
                return
