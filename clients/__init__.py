"""Typed gRPC clients of the mesh's services; stands alone (needs only grpcio, protobuf, numpy)."""

from clients.embedding import AsyncEmbeddingClient, EmbeddingClient, EmbedResult
from clients.errors import (
    DeadlineExceeded,
    InvalidArgument,
    MeshClientError,
    Overloaded,
    Unavailable,
)

__all__ = [
    "AsyncEmbeddingClient",
    "DeadlineExceeded",
    "EmbedResult",
    "EmbeddingClient",
    "InvalidArgument",
    "MeshClientError",
    "Overloaded",
    "Unavailable",
]
