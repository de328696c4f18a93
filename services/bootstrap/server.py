"""``create_server``: the one way every mesh service builds, starts and stops its gRPC server.

Health (NOT_SERVING until the service says it is warm), reflection, tracing and metrics
interceptors, safe request decoding and the domain-error table are wired here, so a service only
brings its servicer. Knows no particular service.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from services.bootstrap.handlers import service_handler
from services.bootstrap.settings import ServiceSettings
from services.bootstrap.telemetry import (
    MetricsInterceptor,
    RpcMetrics,
    start_metrics_endpoint,
    tracing_interceptor,
)

log = logging.getLogger(__name__)

_METRICS_BY_REGISTRY: dict[int, RpcMetrics] = {}


@dataclass
class ServiceRegistration:
    """A proto service and the object implementing its RPCs."""

    descriptor: ServiceDescriptor
    servicer: object


@dataclass
class MeshServer:
    """A created (not yet started) server, the port it bound and its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service_names: list[str]
    metrics_port: int | None = None
    _metrics_http: object | None = field(default=None, repr=False)

    async def start(self) -> None:
        """Start serving; health stays NOT_SERVING until :meth:`set_serving`."""
        await self.server.start()
        log.info("gRPC listening on port %d (%s)", self.port, ", ".join(self.service_names))

    async def set_serving(self, serving: bool = True) -> None:
        """Flip health for the server as a whole and for every registered service."""
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ["", *self.service_names]:
            await self.health.set(name, status)

    async def stop(self, grace: float) -> None:
        """Report NOT_SERVING, then let in-flight RPCs finish for up to ``grace`` seconds."""
        await self.set_serving(False)
        await self.server.stop(grace)
        if self._metrics_http is not None:
            self._metrics_http.shutdown()  # type: ignore[attr-defined]


async def create_server(
    settings: ServiceSettings,
    registrations: list[ServiceRegistration],
    *,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
    options: list[tuple[str, object]] | None = None,
) -> MeshServer:
    """Build a grpc.aio server bound to ``settings.host:settings.port`` (0 binds a free port)."""
    metrics = _METRICS_BY_REGISTRY.get(id(registry))
    if metrics is None:
        metrics = _METRICS_BY_REGISTRY[id(registry)] = RpcMetrics(registry)
    interceptors: list[grpc.aio.ServerInterceptor] = [
        tracing_interceptor(tracer_provider or trace.get_tracer_provider()),
        MetricsInterceptor(metrics),
    ]
    server = grpc.aio.server(interceptors=interceptors, options=options or [
        ("grpc.max_receive_message_length", 16 * 1024 * 1024),
        ("grpc.so_reuseport", 0),
    ])
    names = [r.descriptor.full_name for r in registrations]
    server.add_generic_rpc_handlers([service_handler(r.descriptor, r.servicer) for r in registrations])
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port = server.add_insecure_port(f"{settings.host}:{settings.port}")
    if port == 0:
        raise OSError(f"could not bind {settings.host}:{settings.port}")
    mesh = MeshServer(server=server, port=port, health=health_servicer, service_names=names)
    await mesh.set_serving(False)
    http, mport = start_metrics_endpoint(settings.metrics_host, settings.metrics_port, registry)
    mesh._metrics_http, mesh.metrics_port = http, mport
    return mesh


async def serve(
    settings: ServiceSettings,
    build: Callable[[], Awaitable[tuple[MeshServer, Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]]],
) -> None:
    """Run a service until SIGTERM/SIGINT: start, warm up, SERVING, then a graceful stop.

    ``build`` returns the created server, a warm-up coroutine factory (health flips to SERVING
    when it finishes) and a close coroutine factory (releases engines after the server stopped).
    """
    mesh, warm_up, close = await build()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await mesh.start()
    print(f"READY-PENDING port={mesh.port}", flush=True)
    await warm_up()
    await mesh.set_serving(True)
    print(f"SERVING port={mesh.port} metrics_port={mesh.metrics_port}", flush=True)
    await stop.wait()
    log.info("stopping: grace %.1fs", settings.grace_period_s)
    await mesh.stop(settings.grace_period_s)
    await close()
    log.info("stopped")


def run_service(
    settings_cls: type[ServiceSettings],
    name: str,
    create: Callable[..., Awaitable[Any]],
    release: Callable[[Any], Awaitable[None]],
) -> None:
    """The body of every ``python -m services.<name>``: CLI -> settings -> logging -> tracing -> serve.

    ``create(settings, tracer_provider=...)`` returns a service object with ``mesh`` and ``warm_up``;
    ``release(service)`` frees its engines after the server stopped.
    """
    from services.bootstrap.settings import settings_from_cli
    from services.bootstrap.telemetry import make_tracer_provider

    settings = settings_from_cli(settings_cls, f"python -m services.{name}")
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = make_tracer_provider(f"mesh-{name}", settings.trace_exporter)

    async def build():
        service = await create(settings, tracer_provider=provider)

        async def close() -> None:
            await release(service)
            provider.shutdown()

        return service.mesh, service.warm_up, close

    asyncio.run(serve(settings, build))
