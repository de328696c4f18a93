"""Builds the embedding service: engine, tokenizer, batcher, servicer on the shared bootstrap."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from mesh.embedding.v1 import embedding_pb2 as pb
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from services.bootstrap.lifecycle import stop
from services.bootstrap.server import MeshServer, ServiceRegistration, create_server
from services.embedding.batcher import BatcherMetrics, MicroBatcher
from services.embedding.config import EmbeddingSettings
from services.embedding.embedder import Embedder, EmbedLimits
from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.tokenizer import E5Tokenizer
from services.embedding.errors import ModelFilesMissing
from services.embedding.servicer import EmbeddingServicer

log = logging.getLogger(__name__)
SERVICE = pb.DESCRIPTOR.services_by_name["EmbeddingService"]
_BATCHER_METRICS: dict[int, BatcherMetrics] = {}


def make_engine(settings: EmbeddingSettings) -> EmbeddingEngine:
    """The configured engine (ONNX Runtime in process, or a Triton client)."""
    if settings.engine == "triton":
        from services.embedding.engine.triton import TritonEngine

        return TritonEngine(settings.triton_url, settings.triton_model, settings.precision,
                            settings.triton_timeout_s)
    from services.embedding.engine.onnx import OnnxRuntimeEngine

    return OnnxRuntimeEngine(settings.model_dir, settings.precision, settings.intra_op_threads,
                            settings.single_thread_max_tokens)


@dataclass
class EmbeddingService:
    """A created embedding server with its embedder; ``warm_up`` then flips health to SERVING."""

    mesh: MeshServer
    embedder: Embedder
    engine: EmbeddingEngine

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.mesh.port

    async def warm_up(self) -> None:
        """Run a first inference (and wait for Triton), then report SERVING."""
        if hasattr(self.engine, "wait_ready"):
            await self.embedder.batcher.run_blocking(self.engine.wait_ready, 60.0)  # type: ignore[attr-defined]
        await self.embedder.batcher.run_blocking(self.engine.warm_up)
        await self.mesh.set_serving(True)

    async def release(self) -> None:
        """Release the batcher and the engine (after the server stopped)."""
        await self.embedder.close()
        self.engine.close()

    async def close(self, grace: float = 1.0) -> None:
        """Stop serving, then release (services/bootstrap/lifecycle.py)."""
        await stop(self, grace)


def read_manifest(settings: EmbeddingSettings) -> dict:
    """The model build's manifest (revision, dim, max tokens)."""
    path = settings.model_dir / "manifest.json"
    if not path.exists():
        raise ModelFilesMissing(f"{path} not found; run: python -m services.embedding.modelbuild")
    return json.loads(path.read_text())


async def create_embedding_service(
    settings: EmbeddingSettings,
    *,
    engine: EmbeddingEngine | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
) -> EmbeddingService:
    """Create (not start) the service; ``engine`` overrides the configured one (tests inject faults)."""
    manifest = read_manifest(settings)
    engine = engine or make_engine(settings)
    tokenizer = E5Tokenizer(settings.model_dir / "tokenizer.json", settings.max_tokens)
    metrics = _BATCHER_METRICS.get(id(registry))
    if metrics is None:
        metrics = _BATCHER_METRICS[id(registry)] = BatcherMetrics(registry)
    batcher = MicroBatcher(engine, max_batch_size=settings.max_batch_size,
                           max_queue_delay_s=settings.max_queue_delay_ms / 1000,
                           max_queue_texts=settings.max_queue_texts,
                           max_batch_tokens=settings.max_batch_tokens, metrics=metrics)
    limits = EmbedLimits(settings.max_texts_per_request, settings.max_text_chars, settings.max_tokens)
    revision = manifest["revision"] + (f"+{settings.revision_label}" if settings.revision_label else "")
    embedder = Embedder(tokenizer, batcher, limits, revision)
    info = pb.InfoResponse(model_id=manifest["model_id"], revision=revision, dim=manifest["dim"],
                           max_tokens=settings.max_tokens, engine=engine.name, precision=engine.precision,
                           max_texts_per_request=settings.max_texts_per_request)
    servicer = EmbeddingServicer(embedder, info)
    mesh = await create_server(settings, [ServiceRegistration(SERVICE, servicer)],
                               tracer_provider=tracer_provider, registry=registry)
    batcher.start()
    return EmbeddingService(mesh=mesh, embedder=embedder, engine=engine)
