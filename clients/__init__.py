"""Typed gRPC clients of the mesh's services; stands alone (needs only grpcio, protobuf, numpy)."""

from clients.embedding import AsyncEmbeddingClient, EmbeddingClient, EmbedResult
from clients.errors import (
    DeadlineExceeded,
    InvalidArgument,
    MeshClientError,
    Overloaded,
    Unavailable,
)
from clients.reasoning import AsyncReasoningClient
from clients.retrieval import AsyncRetrievalClient

__all__ = [
    "AsyncEmbeddingClient",
    "AsyncReasoningClient",
    "AsyncRetrievalClient",
    "DeadlineExceeded",
    "EmbedResult",
    "EmbeddingClient",
    "InvalidArgument",
    "MeshClientError",
    "Overloaded",
    "Unavailable",
]
