"""Builds the reasoning service: backends in failover order, generator, servicer."""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass, field

from mesh.reasoning.v1 import reasoning_pb2 as pb
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from services.bootstrap.health import Dependency, Requirement
from services.bootstrap.lifecycle import stop
from services.bootstrap.server import MeshServer, ServiceRegistration, create_server
from services.reasoning.backends import LlmBackend, make_backends
from services.reasoning.backends.base import BackendError, GenerationParams
from services.reasoning.config import ReasoningSettings
from services.reasoning.generation import Failed, Generator, PriceTable, Timeouts
from services.reasoning.grounding import lemmas
from services.reasoning.prompts import reason_messages
from services.reasoning.servicer import ReasoningServicer
from services.runtime.errors import StartupError
from services.runtime.tasks.spec import BUILTIN_DIR, TaskFileError, load_tasks

SERVICE = pb.DESCRIPTOR.services_by_name["ReasoningService"]
log = logging.getLogger(__name__)


@dataclass
class ReasoningService:
    """A created reasoning server and its generator."""

    mesh: MeshServer
    generator: Generator
    servicer: ReasoningServicer
    prefix_warming: asyncio.Task | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.mesh.port

    async def warm_up(self) -> None:
        """One token from the primary backend when it answers (loads its weights), then warm.

        Health then follows the backends: SERVING while at least one answers, NOT_SERVING while none
        does (a probe per backend, services/bootstrap/health.py), flipping back by itself.
        """
        primary = self.generator.backends[0]
        try:
            await primary.probe()
        except BackendError as err:
            log.info("primary backend not reachable at start (%s); health follows the backends", err)
        else:
            result = await self.generator.complete([{"role": "user", "content": "안녕"}], GenerationParams(1, 0.0),
                                                   Timeouts(60.0, 60.0, 60.0), failover=False)
            if isinstance(result, Failed):
                log.info("warm-up call failed (%s: %s); health follows the backends", result.kind, result.message)
            else:
                self.prefix_warming = asyncio.create_task(self._warm_prefix())
        await self.mesh.set_serving(True)

    async def _warm_prefix(self) -> None:
        """Read the reasons prompt's unchanging prefix (system text, worked examples) into the server's cache.

        In the background once serving: the hundreds of tokens (seconds on two cores) the first recommendation
        after a start would otherwise wait for (a request meanwhile queues behind it on a one-slot server).
        """
        result = await self.generator.complete(reason_messages("선물", "상품", ""), GenerationParams(1, 0.0),
                                               Timeouts(120.0, 120.0, 120.0), failover=False)
        if isinstance(result, Failed):
            log.info("warming the reasons prefix failed (%s: %s)", result.kind, result.message)

    async def release(self) -> None:
        """Close the backends (after the server stopped)."""
        if self.prefix_warming is not None:
            self.prefix_warming.cancel()
            await asyncio.gather(self.prefix_warming, return_exceptions=True)
        await self.generator.close()

    async def close(self, grace: float = 1.0) -> None:
        """Stop serving, then release (services/bootstrap/lifecycle.py)."""
        await stop(self, grace)


async def create_reasoning_service(
    settings: ReasoningSettings,
    *,
    backends: list[LlmBackend] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
) -> ReasoningService:
    """Create (not start) the service; ``backends`` overrides the ones built from settings (tests)."""
    generator = Generator(backends or make_backends(settings),
                          Timeouts(settings.first_token_timeout_s, settings.generation_timeout_s,
                                   settings.total_timeout_s), PriceTable(settings.prices_json),
                          settings.prefill_tokens_per_s)
    try:  # a bad task file is one line naming the file and the field, before anything starts
        tasks = load_tasks([BUILTIN_DIR, *settings.task_dirs()])
    except TaskFileError as err:
        raise StartupError(f"task file {err}") from None
    placeholder = ReasoningServicer(generator, settings, "", tasks)
    await asyncio.to_thread(lemmas, "")  # Kiwi loaded once (~3 s) before the first call is grounded
    # Names are unique per position: two backends may share a display name.
    probes = [Dependency(f"llm[{i}] {b.name}", b.probe) for i, b in enumerate(generator.backends)]
    mesh = await create_server(settings, [ServiceRegistration(SERVICE, placeholder)],
                               tracer_provider=tracer_provider, registry=registry, dependencies=probes,
                               capabilities={"": Requirement(tuple(p.name for p in probes), "any")})
    placeholder.instance = settings.instance_name or f"{socket.gethostname()}:{mesh.port}"
    return ReasoningService(mesh=mesh, generator=generator, servicer=placeholder)
