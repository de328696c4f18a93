"""Servers in the test's own process, on port 0, always stopped: the one way tests start them.

A mesh service goes through :func:`services.bootstrap.lifecycle.running` (start, warm up, stop,
release), as the process runner drives it: :func:`running_embedding`, :func:`running_retrieval`,
:func:`running_reasoning` and :func:`running_ocr` create one from settings and run it for a block;
:func:`running_cold` is the same without the warm-up, for a service whose warm-up would spend a
stand-in's scripted answer. Bare gRPC servers (a stand-in of a third-party API, a server of generic
handlers) come from :func:`aio_grpc_server` and :func:`threaded_grpc_server`; the gateway app under
uvicorn from :func:`support.apps.serving`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from concurrent import futures
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from prometheus_client import CollectorRegistry

from services.bootstrap.lifecycle import MeshService, stop
from services.bootstrap.server import MeshServer
from services.runtime.loopguard import starting
from support.embedding import embedding_settings

if TYPE_CHECKING:
    from mesh.retrieval.v1.retrieval_pb2_grpc import RetrievalServiceStub

    from services.embedding.server import EmbeddingService
    from services.ocr.server import OcrService
    from services.reasoning.server import ReasoningService
    from services.retrieval.server import RetrievalService

S = TypeVar("S", bound=MeshService)


@asynccontextmanager
async def running(service: S, grace: float = 0.5) -> AsyncIterator[S]:
    """:func:`services.bootstrap.lifecycle.running`, its start-up outside the event-loop guard.

    A service process counts its loop's stalls from SERVING on; here several services share one loop, so
    a service's creation and warm-up (models loading, which hold the GIL) are wrapped in ``starting``.
    """
    try:
        with starting():
            await service.mesh.start()
            await service.warm_up()
        yield service
    finally:
        await stop(service, grace)


@asynccontextmanager
async def running_cold(service: S, grace: float = 0.5) -> AsyncIterator[S]:
    """Start ``service`` and report it SERVING without its warm-up; stop and release it afterwards.

    For a reasoning service over stand-in backends: its warm-up sends a real generation call, which
    would take the first answer of the stand-in's script.
    """
    try:
        with starting():
            await service.mesh.start()
            await service.mesh.set_serving(True)
        yield service
    finally:
        await stop(service, grace)


class _BareServer:
    """A created :class:`MeshServer` with no service behind it (bootstrap tests: TLS, health), as a service."""

    def __init__(self, mesh: MeshServer) -> None:
        self.mesh = mesh

    async def warm_up(self) -> None:
        await self.mesh.set_serving(True)

    async def release(self) -> None:
        """Nothing to release: no engines, no channels."""


@asynccontextmanager
async def running_server(mesh: MeshServer, grace: float = 0.1) -> AsyncIterator[MeshServer]:
    """A created :class:`MeshServer` started and SERVING for the block, stopped afterwards."""
    async with running(_BareServer(mesh), grace):
        yield mesh


@asynccontextmanager
async def running_retrieval(folder: Path | str, embedding_port: int, *, embedder: Any = None, store: Any = None,
                            **settings: Any) -> AsyncIterator[RetrievalService]:
    """A retrieval service on port 0 over Qdrant local mode in ``folder`` and the embedding service on
    ``embedding_port`` (through ``embedder`` when one is given), running for the block; ``store``: another
    replica's open store instead of the folder's (several replicas in one process)."""
    from services.retrieval.config import RetrievalSettings  # here: unit tests of bare servers skip Qdrant's import
    from services.retrieval.server import create_retrieval_service

    config = RetrievalSettings(**{"port": 0, "metrics_port": -1, "qdrant_location": str(folder),
                                  "embedding_target": f"127.0.0.1:{embedding_port}", **settings})
    with starting():
        service = await create_retrieval_service(config, embedder=embedder, registry=CollectorRegistry(),
                                                 store=store)
    async with running(service):
        yield service


@asynccontextmanager
async def retrieval_stub(folder: Path | str, embedding_port: int, *, embedder: Any = None, store: Any = None,
                         **settings: Any) -> AsyncIterator[tuple[RetrievalService, RetrievalServiceStub]]:
    """:func:`running_retrieval` and a stub on a channel to it, for the block: (the service, the stub)."""
    from mesh.retrieval.v1.retrieval_pb2_grpc import RetrievalServiceStub

    async with running_retrieval(folder, embedding_port, embedder=embedder, store=store, **settings) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        yield service, RetrievalServiceStub(channel)


@asynccontextmanager
async def running_embedding(model_dir: Path, *, engine: Any = None, tracer_provider: Any = None,
                            **settings: Any) -> AsyncIterator[EmbeddingService]:
    """An embedding service over the built model in ``model_dir`` (``settings``: see
    :func:`support.embedding.embedding_settings`), through ``engine`` when one is given, running for the block."""
    from services.embedding.server import create_embedding_service

    with starting():
        service = await create_embedding_service(embedding_settings(model_dir, **settings), engine=engine,
                                                 tracer_provider=tracer_provider, registry=CollectorRegistry())
    async with running(service):
        yield service


@asynccontextmanager
async def running_reasoning(backends: list[Any] | None = None, *, cold: bool = False,
                            **settings: Any) -> AsyncIterator[ReasoningService]:
    """A reasoning service on port 0 (``settings``: ReasoningSettings fields) over ``backends`` (else the
    backends its settings name), running for the block; ``cold``: without the warm-up (:func:`running_cold`)."""
    from services.reasoning.config import ReasoningSettings
    from services.reasoning.server import create_reasoning_service

    config = ReasoningSettings(**{"port": 0, "metrics_port": -1, **settings})
    with starting():
        service = await create_reasoning_service(config, backends=backends, registry=CollectorRegistry())
    async with (running_cold if cold else running)(service):
        yield service


@asynccontextmanager
async def running_ocr(*, reader: Any = None, tracer_provider: Any = None,
                      **settings: Any) -> AsyncIterator[OcrService]:
    """An OCR service on port 0 (``settings``: OcrSettings fields), with ``reader`` as its VLM fallback when
    one is given, running for the block."""
    from services.ocr.config import OcrSettings
    from services.ocr.server import create_ocr_service

    config = OcrSettings(**{"port": 0, "metrics_port": -1, **settings})
    with starting():
        service = await create_ocr_service(config, reader=reader, tracer_provider=tracer_provider,
                                           registry=CollectorRegistry())
    async with running(service):
        yield service


@asynccontextmanager
async def aio_grpc_server(*handlers: grpc.GenericRpcHandler) -> AsyncIterator[int]:
    """A bare ``grpc.aio`` server of generic ``handlers`` on 127.0.0.1, port 0; yields its port."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(0)


@contextmanager
def threaded_grpc_server(*register: Callable[[grpc.Server], None], workers: int = 2) -> Iterator[int]:
    """A bare threaded gRPC server on 127.0.0.1, port 0, for synchronous clients; yields its port.

    Each of ``register`` adds a servicer (``lambda s: add_XServicer_to_server(servicer, s)``).
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    for add in register:
        add(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None)
