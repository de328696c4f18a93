"""Vector stores behind one interface: Qdrant Edge embedded (default) or qdrant-client (server, local)."""

from __future__ import annotations

from services.retrieval.store.base import (
    DENSE,
    SPARSE,
    CatalogMeta,
    CatalogStore,
    LegQuery,
    RawHit,
    StoredDoc,
    StoredPoint,
    point_id,
)
from services.retrieval.store.options import QdrantOptions, store_options

__all__ = ["DENSE", "SPARSE", "CatalogMeta", "CatalogStore", "LegQuery", "QdrantOptions", "RawHit", "StoredDoc",
           "StoredPoint", "open_store", "point_id", "store_options"]


def open_store(location: str, engine: str = "edge", timeout_s: float = 10.0,
               options: QdrantOptions | None = None) -> CatalogStore:
    """A store for a location.

    ``http(s)://`` always goes to a Qdrant server through qdrant-client; ``:memory:`` or a folder
    runs embedded, on Qdrant Edge (``engine="edge"``, default) or qdrant-client's local mode
    (``engine="client"``). ``options`` (API key, TLS, gRPC; shards, replication, consistency,
    on-disk storage) take effect on a server only: Qdrant Edge ignores them, and local mode accepts
    the collection layout and read consistency but keeps one shard without replicas.
    """
    if location.startswith(("http://", "https://")) or engine == "client":
        from services.retrieval.store.client import ClientCatalogStore, open_client

        server = location.startswith(("http://", "https://"))
        return ClientCatalogStore(open_client(location, timeout_s, options), options, exclusive=not server)
    from services.retrieval.store.edge import EdgeCatalogStore

    return EdgeCatalogStore(location)
