"""Catalog store over qdrant-client.

A Qdrant server or cluster (``http(s)://``), or the client's pure-Python local mode
(``engine=client``; the reference the edge engine is checked against).

Aliases are Qdrant aliases; catalog metadata lives in a small ``_mesh_catalogs`` collection.
Collections are created with the cluster layout of :class:`QdrantOptions` and read with its read
consistency; local mode accepts both and ignores them (one shard, no replicas), so the same calls
run here and against a server.
"""

from __future__ import annotations

import math
import ssl
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from services.bootstrap.errors import NotFound
from services.retrieval.query import Condition, Filter
from services.retrieval.store.base import (
    DENSE,
    DOCUMENT,
    ORDINAL,
    SPARSE,
    CatalogMeta,
    CatalogStore,
    LegQuery,
    RawHit,
    StoredPoint,
    passage_point_id,
    point_id,
    raw_hit,
)
from services.retrieval.store.options import QdrantOptions

META_COLLECTION = "_mesh_catalogs"
_META_VECTOR = "none"
FIELD_SCHEMAS = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "bool": models.PayloadSchemaType.BOOL,
}


def open_client(location: str, timeout_s: float = 10.0, options: QdrantOptions | None = None) -> QdrantClient:
    """``:memory:``, ``http(s)://host:port``, or a folder (qdrant-client local mode; connection options unused)."""
    if location == ":memory:":
        return QdrantClient(location=":memory:")
    if not location.startswith(("http://", "https://")):
        return QdrantClient(path=location)
    opts = options or QdrantOptions()
    # qdrant-client takes TLS from the URL's scheme over its https flag, so the flag rewrites the scheme.
    tls = opts.https or location.startswith("https://")
    url = "https://" + location.removeprefix("http://") if tls and location.startswith("http://") else location
    extra: dict[str, Any] = {}
    if opts.ca_cert is not None:
        pem = Path(opts.ca_cert).read_bytes()
        extra["grpc_options"] = {"root_certificates": pem}  # gRPC channel credentials
        extra["verify"] = ssl.create_default_context(cafile=opts.ca_cert)  # REST (httpx)
    return QdrantClient(url=url, https=tls, api_key=opts.api_key or None, prefer_grpc=opts.prefer_grpc,
                        grpc_port=opts.grpc_port, timeout=math.ceil(timeout_s), **extra)


def _condition(c: Condition) -> models.FieldCondition:
    key = f"payload.{c.field}"
    if c.is_range:
        return models.FieldCondition(key=key, range=models.Range(gte=c.gte, lte=c.lte, gt=c.gt, lt=c.lt))
    if c.any_of is not None:
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(c.any_of)))
    return models.FieldCondition(key=key, match=models.MatchValue(value=c.equals))


def qdrant_filter(f: Filter) -> models.Filter | None:
    """The domain filter as a Qdrant filter (None when empty)."""
    if not f.must and not f.must_not:
        return None
    return models.Filter(must=[_condition(c) for c in f.must] or None,
                         must_not=[_condition(c) for c in f.must_not] or None)


class ClientCatalogStore(CatalogStore):
    """Catalogs on a qdrant-client connection."""

    def __init__(self, client: QdrantClient, options: QdrantOptions | None = None, *, exclusive: bool = False) -> None:
        self.client = client
        self.exclusive = exclusive  # local mode holds its folder alone; a server may be shared
        self.options = options or QdrantOptions()
        rc = self.options.read_consistency
        self._consistency: models.ReadConsistency | None = models.ReadConsistencyType(rc) if isinstance(rc, str) else rc
        if not self.client.collection_exists(META_COLLECTION):
            # One shard (a few points), replicated like the catalogs so that metadata survives a lost peer.
            self.client.create_collection(META_COLLECTION, vectors_config={
                _META_VECTOR: models.VectorParams(size=1, distance=models.Distance.DOT)},
                shard_number=1, replication_factor=self.options.replication_factor,
                write_consistency_factor=self.options.write_consistency_factor)

    def get_meta(self, name: str) -> CatalogMeta:  # noqa: D102
        found = self.client.retrieve(META_COLLECTION, [point_id(name)], with_payload=True,
                                     consistency=self._consistency)
        if not found:
            raise NotFound(f"collection {name!r} does not exist")
        return CatalogMeta.from_payload(dict(found[0].payload or {}))

    def put_meta(self, meta: CatalogMeta) -> None:  # noqa: D102
        self.client.upsert(META_COLLECTION, points=[models.PointStruct(
            id=point_id(meta.name), vector={_META_VECTOR: [0.0]}, payload=meta.payload())], wait=True)

    def create_version(self, name: str, fields: dict[str, str], dim: int) -> str:  # noqa: D102
        collection = f"{name}__v{time.time_ns() // 1_000_000}"
        o = self.options
        self.client.create_collection(
            collection,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE,
                                                       on_disk=o.vectors_on_disk)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(
                modifier=models.Modifier.IDF, index=models.SparseIndexParams(on_disk=o.vectors_on_disk))},
            shard_number=o.shard_number,
            replication_factor=o.replication_factor,
            write_consistency_factor=o.write_consistency_factor,
            on_disk_payload=o.payload_on_disk,
        )
        with warnings.catch_warnings():
            # Local mode filters without indexes and says so; a server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            self.client.create_payload_index(collection, ORDINAL, field_schema=models.PayloadSchemaType.INTEGER)
            for fname, ftype in fields.items():
                self.client.create_payload_index(collection, f"payload.{fname}", field_schema=FIELD_SCHEMAS[ftype])
        return collection

    def swap_alias(self, alias: str, collection: str) -> None:  # noqa: D102
        ops: list[Any] = []
        if self.alias_target(alias) is not None:
            ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=collection,
                                                                              alias_name=alias)))
        self.client.update_collection_aliases(change_aliases_operations=ops)

    def forget_catalog(self, name: str) -> None:  # noqa: D102
        if self.alias_target(name) is not None:
            self.client.update_collection_aliases(change_aliases_operations=[
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))])
        self.client.delete(META_COLLECTION, points_selector=models.PointIdsList(points=[point_id(name)]), wait=True)

    def list_meta(self) -> list[CatalogMeta]:  # noqa: D102
        out: list[CatalogMeta] = []
        offset = None
        while True:
            points, offset = self.client.scroll(META_COLLECTION, limit=256, offset=offset, with_payload=True,
                                                consistency=self._consistency)
            out += [CatalogMeta.from_payload(dict(p.payload)) for p in points if p.payload]
            if offset is None:
                return out

    def list_collections(self) -> list[str]:  # noqa: D102
        return sorted(c.name for c in self.client.get_collections().collections if c.name != META_COLLECTION)

    def alias_target(self, alias: str) -> str | None:  # noqa: D102
        for a in self.client.get_aliases().aliases:
            if a.alias_name == alias:
                return a.collection_name
        return None

    def drop_collection(self, collection: str) -> None:  # noqa: D102
        if self.client.collection_exists(collection):
            self.client.delete_collection(collection)

    def count_points(self, collection: str, later_passages: bool = False) -> int:  # noqa: D102
        flt = models.Filter(must=[models.FieldCondition(key=ORDINAL, range=models.Range(gte=1))]) \
            if later_passages else None
        return self.client.count(collection, count_filter=flt, exact=True).count

    def write_points(self, collection: str, points: list[StoredPoint]) -> None:  # noqa: D102
        self.client.upsert(collection, wait=True, points=[
            models.PointStruct(
                id=passage_point_id(p.doc_id, p.ordinal),
                vector={
                    **({DENSE: p.dense} if p.dense is not None else {}),
                    SPARSE: models.SparseVector(indices=p.sparse_indices, values=p.sparse_values),
                },
                payload=p.stored_payload(),
            ) for p in points])

    def remove_points(self, collection: str, point_ids: list[str]) -> None:  # noqa: D102
        self.client.delete(collection, points_selector=models.PointIdsList(points=point_ids), wait=True)  # type: ignore[arg-type]

    def payloads(self, collection: str, point_ids: list[str], keys: list[str]) -> dict[str, dict[str, Any]]:  # noqa: D102
        if not point_ids:
            return {}
        found = self.client.retrieve(collection, point_ids, with_payload=models.PayloadSelectorInclude(include=keys),
                                     with_vectors=False, consistency=self._consistency)
        return {str(p.id): dict(p.payload or {}) for p in found}

    def scroll_points(self, collection: str, batch: int = 256) -> Iterator[list[dict[str, Any]]]:  # noqa: D102
        offset = None
        while True:
            points, offset = self.client.scroll(collection, limit=batch, offset=offset, with_payload=True,
                                                consistency=self._consistency)
            yield [dict(p.payload) for p in points if p.payload]
            if offset is None:
                return

    def query(self, collection: str, queries: list[LegQuery]) -> list[list[RawHit]]:  # noqa: D102
        requests = [self._request(q) for q in queries]
        answers = self.client.query_batch_points(collection, requests=requests,
                                                 consistency=self._consistency)
        return [[_hit(p) for p in a.points] for a in answers]

    @staticmethod
    def _request(q: LegQuery) -> models.QueryRequest:
        flt = qdrant_filter(q.filter)
        sparse = models.SparseVector(indices=list(q.sparse_indices), values=list(q.sparse_values))
        vectors = [DENSE] if q.with_vectors else False
        payload = models.PayloadSelectorExclude(exclude=[DOCUMENT])  # the final hits fetch the whole text
        if q.kind == "dense":
            return models.QueryRequest(query=q.dense, using=DENSE, filter=flt, limit=q.limit, with_payload=payload,
                                       with_vector=vectors)
        if q.kind == "sparse":
            return models.QueryRequest(query=sparse, using=SPARSE, filter=flt, limit=q.limit, with_payload=payload,
                                       with_vector=vectors)
        fusion: Any = (models.RrfQuery(rrf=models.Rrf(k=q.rrf_k)) if q.fusion == "rrf"
                       else models.FusionQuery(fusion=models.Fusion.DBSF))
        return models.QueryRequest(
            prefetch=[models.Prefetch(query=q.dense, using=DENSE, filter=flt, limit=q.prefetch_limit),
                      models.Prefetch(query=sparse, using=SPARSE, filter=flt, limit=q.prefetch_limit)],
            query=fusion, limit=q.limit, with_payload=payload, with_vector=vectors)

    def ping(self) -> None:
        """One cheap call to the server (its collection list)."""
        self.client.get_collections()

    def close(self) -> None:  # noqa: D102
        self.client.close()


def _hit(p: models.ScoredPoint) -> RawHit:
    vec = None
    if isinstance(p.vector, dict) and DENSE in p.vector:
        vec = [float(x) for x in p.vector[DENSE]]  # type: ignore[union-attr, arg-type]
    return raw_hit(p.payload or {}, str(p.id), float(p.score), vec)
