"""Async client of mesh.reasoning.v1.ReasoningService; every call carries a deadline.

Streams are async iterators of the service's events; leaving one early (``break``, or the task
being cancelled) cancels the RPC, which cancels the backend request behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from mesh.reasoning.v1 import reasoning_pb2 as pb
from mesh.reasoning.v1 import reasoning_pb2_grpc as pb_grpc

from clients.channels import aio_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck

DEFAULT_TIMEOUT_S = 60.0


class AsyncReasoningClient(HealthCheck):
    """grpc.aio client. No automatic retries: generation is not idempotent (and costs money)."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self._channel = channel or aio_channel(target)
        self._stub = pb_grpc.ReasoningServiceStub(self._channel)

    async def _stream(self, call) -> AsyncIterator:
        try:
            async for event in call:
                yield event
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()  # no-op when finished; cancels the RPC when the consumer left early

    def generate(self, request: pb.GenerateRequest,
                 timeout_s: float | None = None) -> AsyncIterator[pb.GenerateResponse]:
        """Stream a prompt's answer."""
        return self._stream(self._stub.Generate(request, timeout=timeout_s or self.timeout_s))

    def chat(self, request: pb.ChatRequest, timeout_s: float | None = None) -> AsyncIterator[pb.ChatResponse]:
        """Stream a chat turn."""
        return self._stream(self._stub.Chat(request, timeout=timeout_s or self.timeout_s))

    async def _unary(self, method, request, timeout_s: float | None):
        try:
            return await method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def reasons(self, request: pb.GenerateReasonsRequest,
                      timeout_s: float | None = None) -> pb.GenerateReasonsResponse:
        """Reasons for one query's items (one LLM call)."""
        return await self._unary(self._stub.GenerateReasons, request, timeout_s)

    async def reasons_batch(self, request: pb.GenerateReasonsBatchRequest,
                            timeout_s: float | None = None) -> pb.GenerateReasonsBatchResponse:
        """Reasons for several queries, each failing on its own."""
        return await self._unary(self._stub.GenerateReasonsBatch, request, timeout_s)

    async def summarize(self, request: pb.SummarizeRequest, timeout_s: float | None = None) -> pb.SummarizeResponse:
        """A summary, or an explicit empty result."""
        return await self._unary(self._stub.Summarize, request, timeout_s)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()
