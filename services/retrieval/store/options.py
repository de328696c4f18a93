"""How the retrieval service reaches a Qdrant server and how it lays out the collections it creates there.

Connection options (API key, TLS, gRPC) apply to ``http(s)://`` locations only. Cluster options
(shards, replication, write and read consistency, on-disk storage) are sent with every collection
the qdrant-client store creates and with every read; Qdrant Edge and qdrant-client's local mode
hold one shard without replicas and ignore them, so only a Qdrant server or cluster applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from services.retrieval.config import RetrievalSettings

OnDisk = Literal["none", "payload", "vectors", "all"]


@dataclass(frozen=True)
class QdrantOptions:
    """Connection and collection-layout options of the qdrant-client store (defaults: the server's)."""

    api_key: str | None = field(default=None, repr=False)
    https: bool = False
    ca_cert: str | None = None
    prefer_grpc: bool = True
    grpc_port: int = 6334
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk: OnDisk = "payload"
    read_consistency: int | str | None = None

    @property
    def vectors_on_disk(self) -> bool:
        """Dense vectors (and the sparse index) served from disk through mmap."""
        return self.on_disk in ("vectors", "all")

    @property
    def payload_on_disk(self) -> bool:
        """Payload read from disk when requested (indexed fields stay in RAM)."""
        return self.on_disk in ("payload", "all")


def store_options(settings: RetrievalSettings) -> QdrantOptions:
    """The store options of the retrieval settings; reads the API key file (OSError/ValueError when unusable)."""
    api_key = settings.qdrant_api_key.get_secret_value() or None
    if settings.qdrant_api_key_file is not None:
        api_key = settings.qdrant_api_key_file.read_text(encoding="utf-8").strip()
        if not api_key:
            raise ValueError(f"qdrant_api_key_file {str(settings.qdrant_api_key_file)!r} is empty "
                             "(MESH_RETRIEVAL_QDRANT_API_KEY_FILE)")
    raw = settings.read_consistency
    consistency: int | str | None = int(raw) if raw.isdigit() else raw or None
    return QdrantOptions(
        api_key=api_key,
        https=settings.qdrant_https,
        ca_cert=str(settings.qdrant_ca_cert) if settings.qdrant_ca_cert is not None else None,
        prefer_grpc=settings.qdrant_prefer_grpc,
        grpc_port=settings.qdrant_grpc_port,
        shard_number=settings.shard_number,
        replication_factor=settings.replication_factor,
        write_consistency_factor=settings.write_consistency_factor,
        on_disk=settings.on_disk,
        read_consistency=consistency,
    )
