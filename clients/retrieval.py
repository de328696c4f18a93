"""Async client of mesh.retrieval.v1.RetrievalService; every call carries a deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import grpc
from mesh.retrieval.v1 import retrieval_pb2 as pb
from mesh.retrieval.v1 import retrieval_pb2_grpc as pb_grpc

from clients.errors import from_rpc_error
from clients.health import HealthCheck
from clients.retry import retry_options

# Reads, and writes that are idempotent by id; CreateCollection and Reindex are not retried.
_RETRY = retry_options("mesh.retrieval.v1.RetrievalService",
                       ["Search", "GetCollection", "UpsertDocuments", "DeleteDocuments"])

DEFAULT_TIMEOUT_S = 5.0
# A search may return 100 hits of 20,000 characters each (up to ~6 MB of UTF-8, with payloads): gRPC's
# default 4 MiB receive limit would turn a valid large answer into RESOURCE_EXHAUSTED.
_LIMITS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


class AsyncRetrievalClient(HealthCheck):
    """grpc.aio client; methods take and return the service's proto messages."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.timeout_s = timeout_s
        self._channel = channel or grpc.aio.insecure_channel(target, options=[*_RETRY, *_LIMITS])
        self._stub = pb_grpc.RetrievalServiceStub(self._channel)

    async def _call(self, method, request, timeout_s: float | None):
        try:
            return await method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def search(self, request: pb.SearchRequest, timeout_s: float | None = None) -> pb.SearchResponse:
        """Search a collection."""
        return await self._call(self._stub.Search, request, timeout_s)

    async def create_collection(self, request: pb.CreateCollectionRequest,
                                timeout_s: float | None = None) -> pb.CreateCollectionResponse:
        """Create a collection."""
        return await self._call(self._stub.CreateCollection, request, timeout_s)

    async def get_collection(self, name: str, timeout_s: float | None = None) -> pb.GetCollectionResponse:
        """Describe a collection."""
        return await self._call(self._stub.GetCollection, pb.GetCollectionRequest(name=name), timeout_s)

    async def upsert(self, request: pb.UpsertDocumentsRequest,
                     timeout_s: float | None = None) -> pb.UpsertDocumentsResponse:
        """Write one batch."""
        return await self._call(self._stub.UpsertDocuments, request, timeout_s)

    async def delete(self, collection: str, ids: list[str],
                     timeout_s: float | None = None) -> pb.DeleteDocumentsResponse:
        """Remove documents."""
        return await self._call(self._stub.DeleteDocuments, pb.DeleteDocumentsRequest(collection=collection, ids=ids),
                                timeout_s)

    async def upsert_stream(self, batches: Iterable[pb.UpsertDocumentsStreamRequest],
                            timeout_s: float = 3600.0) -> AsyncIterator[pb.UpsertDocumentsStreamResponse]:
        """Bulk upsert; yields progress, then the summary."""
        try:
            async for event in self._stub.UpsertDocumentsStream(iter(batches), timeout=timeout_s):
                yield event
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def reindex(self, collection: str, batch_size: int = 64,
                      timeout_s: float = 3600.0) -> AsyncIterator[pb.ReindexResponse]:
        """Rebuild and swap; yields progress, then the summary."""
        try:
            async for event in self._stub.Reindex(pb.ReindexRequest(collection=collection, batch_size=batch_size),
                                                  timeout=timeout_s):
                yield event
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()
