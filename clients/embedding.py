"""Sync and async clients of mesh.embedding.v1.EmbeddingService; every call carries a deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import grpc
import numpy as np
from mesh.embedding.v1 import embedding_pb2 as pb
from mesh.embedding.v1 import embedding_pb2_grpc as pb_grpc

from clients.channels import aio_channel, sync_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck
from clients.retry import retry_options

# Every EmbeddingService RPC is a pure function of its input: all may be retried.
_RETRY = retry_options("mesh.embedding.v1.EmbeddingService", ["Embed", "Info"])

Kind = Literal["query", "passage"]
_KINDS = {"query": pb.EMBED_KIND_QUERY, "passage": pb.EMBED_KIND_PASSAGE}
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_STREAM_TIMEOUT_S = 3600.0


@dataclass
class EmbedResult:
    """Vectors ``float32 [n, dim]`` with the per-text and per-request facts the server returned."""

    vectors: np.ndarray
    token_counts: list[int]
    truncated: list[bool]
    model_revision: str
    timings: pb.EmbedTimings


@dataclass(frozen=True)
class ModelInfo:
    """The served model, as ``Info`` describes it."""

    model_id: str
    revision: str
    dim: int
    max_tokens: int
    engine: str
    precision: str
    max_texts_per_request: int


def info_from_proto(resp: pb.InfoResponse) -> ModelInfo:
    """An InfoResponse as the domain type."""
    return ModelInfo(model_id=resp.model_id, revision=resp.revision, dim=resp.dim, max_tokens=resp.max_tokens,
                     engine=resp.engine, precision=resp.precision, max_texts_per_request=resp.max_texts_per_request)


def _request(texts: list[str], kind: Kind, strict: bool, revision: str = "") -> pb.EmbedRequest:
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'query' or 'passage', not {kind!r}")
    return pb.EmbedRequest(texts=texts, kind=_KINDS[kind], options=pb.EmbedOptions(strict_length=strict),
                           revision=revision)


def result_from_proto(resp: pb.EmbedResponse) -> EmbedResult:
    """Turn an EmbedResponse into numpy vectors and plain lists."""
    dim = len(resp.embeddings[0].values) if resp.embeddings else 0
    vectors = np.array([e.values for e in resp.embeddings], dtype=np.float32).reshape(len(resp.embeddings), dim)
    return EmbedResult(
        vectors=vectors,
        token_counts=[e.token_count for e in resp.embeddings],
        truncated=[e.truncated for e in resp.embeddings],
        model_revision=resp.model_revision,
        timings=resp.timings,
    )


def _stream_requests(batches: Iterable[list[str]], kind: Kind, strict: bool) -> Iterator[pb.EmbedStreamRequest]:
    for i, texts in enumerate(batches):
        yield pb.EmbedStreamRequest(batch_id=str(i), texts=texts, kind=_KINDS[kind],
                                    options=pb.EmbedOptions(strict_length=strict))


class EmbeddingClient:
    """Blocking client; ``timeout_s`` is the default deadline of every call."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.Channel | None = None) -> None:
        self.timeout_s = timeout_s
        self._channel = channel or sync_channel(target, options=_RETRY)
        self._stub = pb_grpc.EmbeddingServiceStub(self._channel)

    def embed(self, texts: list[str], kind: Kind = "query", *, strict: bool = False,
              timeout_s: float | None = None) -> EmbedResult:
        """Embed texts; raises a :class:`clients.errors.MeshClientError` subclass on failure."""
        try:
            resp = self._stub.Embed(_request(texts, kind, strict), timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        return result_from_proto(resp)

    def embed_stream(self, batches: Iterable[list[str]], kind: Kind = "passage", *, strict: bool = False,
                     timeout_s: float = DEFAULT_STREAM_TIMEOUT_S) -> Iterator[pb.EmbedStreamResponse]:
        """Stream batches for bulk ingest; yields per-batch results, then the summary."""
        try:
            yield from self._stub.EmbedStream(_stream_requests(batches, kind, strict), timeout=timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def info(self, timeout_s: float | None = None) -> ModelInfo:
        """Describe the served model."""
        try:
            return info_from_proto(self._stub.Info(pb.InfoRequest(), timeout=timeout_s or self.timeout_s))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> EmbeddingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEmbeddingClient(HealthCheck):
    """asyncio client (grpc.aio); ``timeout_s`` is the default deadline of every call."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.timeout_s = timeout_s
        self._channel = channel or aio_channel(target, options=_RETRY)
        self._stub = pb_grpc.EmbeddingServiceStub(self._channel)

    async def embed(self, texts: list[str], kind: Kind = "query", *, strict: bool = False,
                    timeout_s: float | None = None, revision: str = "") -> EmbedResult:
        """Embed texts; raises a :class:`clients.errors.MeshClientError` subclass on failure.

        ``revision``, when given, is the model revision the vectors must come from: an instance serving
        another answers FAILED_PRECONDITION.
        """
        try:
            resp = await self._stub.Embed(_request(texts, kind, strict, revision), timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        return result_from_proto(resp)

    async def embed_stream(self, batches: Iterable[list[str]], kind: Kind = "passage", *,
                           strict: bool = False, timeout_s: float = DEFAULT_STREAM_TIMEOUT_S,
                           ) -> AsyncIterator[pb.EmbedStreamResponse]:
        """Stream batches for bulk ingest; yields per-batch results, then the summary."""
        call = self._stub.EmbedStream(_stream_requests(batches, kind, strict), timeout=timeout_s)
        try:
            async for item in call:
                yield item
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def info(self, timeout_s: float | None = None) -> ModelInfo:
        """Describe the served model."""
        try:
            return info_from_proto(await self._stub.Info(pb.InfoRequest(), timeout=timeout_s or self.timeout_s))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncEmbeddingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
