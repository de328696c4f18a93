"""Health per capability over grpc.health.v1, shared by every async client.

Each service reports its core under its full name (``""`` says the same) and the capabilities that
depend on something else under ``<full name>/<capability>``: a service is SERVING for what it can
answer now (services/bootstrap/health.py).
"""

from __future__ import annotations

from typing import Literal

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

EMBEDDING = "mesh.embedding.v1.EmbeddingService"
RETRIEVAL = "mesh.retrieval.v1.RetrievalService"
RETRIEVAL_DENSE = f"{RETRIEVAL}/dense"  # dense and hybrid search: needs the embedding service
RETRIEVAL_INGEST = f"{RETRIEVAL}/ingest"  # upserts and reindex embed passages: needs the embedding service
REASONING = "mesh.reasoning.v1.ReasoningService"  # needs at least one reachable LLM backend
OCR = "mesh.ocr.v1.OcrService"  # Extract: Tesseract in process
OCR_JOBS = f"{OCR}/jobs"  # multi-page jobs: needs Redis

HealthState = Literal["SERVING", "NOT_SERVING", "UNKNOWN", "UNREACHABLE"]


async def check_health(channel: grpc.aio.Channel, service: str = "", timeout_s: float = 1.0) -> HealthState:
    """The health of ``service`` on ``channel``: UNKNOWN when it is not registered, UNREACHABLE on no answer."""
    try:
        resp = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                               timeout=timeout_s)
    except grpc.RpcError as err:
        return "UNKNOWN" if err.code() == grpc.StatusCode.NOT_FOUND else "UNREACHABLE"  # type: ignore[attr-defined]
    if resp.status == health_pb2.HealthCheckResponse.SERVING:
        return "SERVING"
    return "NOT_SERVING" if resp.status == health_pb2.HealthCheckResponse.NOT_SERVING else "UNKNOWN"


class HealthCheck:
    """Adds ``health()`` to a client that keeps its grpc.aio channel in ``_channel``."""

    _channel: grpc.aio.Channel

    async def health(self, service: str = "", timeout_s: float = 1.0) -> HealthState:
        """The service's health for ``service`` (a name from this module; ``""`` is the core)."""
        return await check_health(self._channel, service, timeout_s)

