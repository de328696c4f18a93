"""Builds the retrieval service: Qdrant store, Korean analyzer, embedding client, servicer."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from mesh.retrieval.v1 import retrieval_pb2 as pb
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from services.bootstrap.health import Dependency, Requirement
from services.bootstrap.lifecycle import stop
from services.bootstrap.server import MeshServer, ServiceRegistration, create_server
from services.retrieval.config import RetrievalSettings
from services.retrieval.embedding_client import GrpcEmbedder
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.retriever import Retriever
from services.retrieval.servicer import RetrievalServicer
from services.retrieval.state import Embedder
from services.retrieval.store import CatalogStore, open_store, store_options
from services.runtime.errors import StartupError

log = logging.getLogger(__name__)
SERVICE = pb.DESCRIPTOR.services_by_name["RetrievalService"]


@dataclass
class RetrievalService:
    """A created retrieval server and its retriever."""

    mesh: MeshServer
    retriever: Retriever
    embedder: Embedder
    others: list[Embedder] = field(default_factory=list)
    _sweeper: asyncio.Task[None] | None = None
    owns_store: bool = True  # False: a store shared with other replicas in this process (tests), closed by its owner

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.mesh.port

    async def warm_up(self) -> None:
        """Remove what an interrupted reindex left (the writer), warm the analyzer, then report SERVING.

        The embedding service may come later.
        """
        if not self.retriever.reader:  # leftovers and replaced versions are the writer's to drop (a reader
            # would take the writer's reindex in progress for a leftover)
            await self.retriever.reindexer.drop_leftovers()
            self._sweeper = asyncio.ensure_future(self._expire_kept_versions())
        await self.retriever.state.terms(["워밍업 문장입니다"])
        await self.mesh.set_serving(True)

    async def _expire_kept_versions(self) -> None:
        """Remove the versions upgrades kept once their grace period ends (checked every 30 s at most)."""
        every = min(30.0, max(0.5, self.retriever.state.grace_s / 4))
        while True:
            await asyncio.sleep(every)
            try:
                await self.retriever.reindexer.expire_kept()
            except Exception:  # noqa: BLE001 - the sweep tries again; a failure must not end it
                log.warning("removing expired kept versions failed; retrying in %.0f s", every, exc_info=True)

    async def release(self) -> None:
        """Release the retriever, Qdrant and the embedding channel (after the server stopped)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self.retriever.close()
        await self.embedder.close()
        for other in self.others:
            await other.close()
        if self.owns_store:
            self.retriever.store.close()

    async def close(self, grace: float = 1.0) -> None:
        """Stop serving, then release (services/bootstrap/lifecycle.py)."""
        await stop(self, grace)


async def create_retrieval_service(
    settings: RetrievalSettings,
    *,
    embedder: Embedder | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
    store: CatalogStore | None = None,
) -> RetrievalService:
    """Create (not start) the service; ``embedder`` overrides the gRPC one (tests inject faults).

    ``store``: an open store shared with other replicas of this process (the embedded engine's folder
    cannot be opened by two; tests of several replicas share one), left open when this service closes.
    """
    if store is not None:
        return await _create(settings, store, False, embedder, tracer_provider, registry)
    if settings.qdrant_location not in (":memory:",) and not settings.qdrant_location.startswith("http"):
        import os

        os.makedirs(settings.qdrant_location, exist_ok=True)
    if settings.reuse_port and not settings.qdrant_location.startswith("http"):
        raise StartupError("several retrieval workers need a Qdrant server (--qdrant-location http://...): the "
                           "embedded engine's folder cannot be shared by processes")
    try:
        store = open_store(settings.qdrant_location, settings.qdrant_engine, settings.qdrant_timeout_s,
                           options=store_options(settings))
    except (RuntimeError, OSError, ValueError) as exc:  # e.g. the folder is held by another process
        raise StartupError(f"cannot open Qdrant at {settings.qdrant_location!r} (--qdrant-location): "
                           f"{' '.join(str(exc).split())}") from exc
    return await _create(settings, store, True, embedder, tracer_provider, registry)


async def _create(settings: RetrievalSettings, store: CatalogStore, owns_store: bool, embedder: Embedder | None,
                  tracer_provider: trace.TracerProvider | None, registry: CollectorRegistry) -> RetrievalService:
    analyzer = KoreanAnalyzer(settings.term_profile, settings.analyzer)
    embedder = embedder or GrpcEmbedder(settings.embedding_target)
    others: list[Embedder] = [GrpcEmbedder(t) for t in settings.more_targets()]
    # Keyword search needs only the store; dense/hybrid search and ingest also embed through the embedding
    # service. An embedded store is this process; a Qdrant server is probed like any dependency.
    dependencies = [Dependency("embedding", embedder.probe)]
    store_needed: tuple[str, ...] = ()
    if settings.qdrant_location.startswith(("http://", "https://")):
        dependencies.append(Dependency("qdrant", lambda: asyncio.to_thread(store.ping)))
        store_needed = ("qdrant",)
    needs_embedding = Requirement(("embedding", *store_needed))
    retriever = Retriever(store, analyzer, embedder, k1=settings.bm25_k1, b=settings.bm25_b,
                          embed_timeout_s=settings.embed_timeout_s, default_fusion=settings.fusion,
                          default_rrf_k=settings.rrf_k, default_dense_weight=settings.dense_weight,
                          layout=settings.layout(), others=others, grace_s=settings.rollback_grace_s,
                          meta_ttl_s=settings.meta_ttl_s, reader=settings.role == "reader")
    mesh = await create_server(settings, [ServiceRegistration(SERVICE, RetrievalServicer(retriever))],
                               tracer_provider=tracer_provider, registry=registry,
                               dependencies=dependencies,
                               capabilities={"": Requirement(store_needed), "dense": needs_embedding,
                                             "ingest": needs_embedding})
    return RetrievalService(mesh=mesh, retriever=retriever, embedder=embedder, others=others, owns_store=owns_store)
