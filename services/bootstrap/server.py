"""``create_server``: the one way every mesh service builds, starts and stops its gRPC server.

Health (NOT_SERVING until the service says it is warm), reflection, a span and RPC metrics per
call (services/bootstrap/telemetry.py), safe request decoding and the domain-error table are wired
here, so a service only brings its servicer. Knows no particular service.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import traceback
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
from services.bootstrap.health import Dependency, DependencyMonitor, Requirement
from services.bootstrap.telemetry import RpcMetrics, RpcTelemetry, rpc_kind, start_metrics_endpoint
from services.runtime.errors import StartupError
from services.runtime.settings import ServiceSettings

log = logging.getLogger(__name__)

_METRICS_BY_REGISTRY: dict[int, RpcMetrics] = {}


@dataclass
class ServiceRegistration:
    """A proto service and the object implementing its RPCs."""

    descriptor: ServiceDescriptor
    servicer: object


@dataclass
class MeshServer:
    """A created (not yet started) server, the port it bound and its health servicer.

    Health is per capability (services/bootstrap/health.py): a name is SERVING when the service
    is warm and the dependencies its requirement names are up.
    """

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service_names: list[str]
    metrics_port: int | None = None
    monitor: DependencyMonitor = field(default_factory=lambda: DependencyMonitor([]))
    requirements: dict[str, Requirement] = field(default_factory=dict)
    warm: bool = False
    _metrics_http: object | None = field(default=None, repr=False)
    _status: dict[str, bool] = field(default_factory=dict, repr=False)

    async def start(self) -> None:
        """Start serving; health stays NOT_SERVING until :meth:`set_serving`."""
        await self.server.start()
        log.info("gRPC listening on port %d (%s)", self.port, ", ".join(self.service_names))

    async def set_serving(self, serving: bool = True) -> None:
        """Mark the service warm (or not); each capability then follows its dependencies."""
        self.warm = serving
        if serving:
            await self.monitor.start()
        await self.refresh()

    def serving(self, name: str = "") -> bool:
        """Whether health name ``name`` reports SERVING now."""
        return self._status.get(name, False)

    async def refresh(self) -> None:
        """Recompute every capability's health from warmth and dependency states."""
        up = self.monitor.up()
        for name, requirement in self.requirements.items():
            serving = self.warm and requirement.met(up)
            if self._status.get(name) == serving:
                continue
            if name and name not in self.service_names and name in self._status:
                log.info("capability %s is %s", name, "SERVING" if serving else "NOT_SERVING")
            self._status[name] = serving
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING if serving
                                  else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def stop(self, grace: float) -> None:
        """Report NOT_SERVING, then let in-flight RPCs finish for up to ``grace`` seconds."""
        await self.monitor.close()
        await self.set_serving(False)
        await self.server.stop(grace)
        if self._metrics_http is not None:  # shutdown waits up to its serving thread's poll (0.5 s): off the loop
            await asyncio.to_thread(self._metrics_http.shutdown)  # type: ignore[attr-defined]


def server_credentials(settings: ServiceSettings) -> grpc.ServerCredentials | None:
    """TLS (or mutual TLS with ``--tls-client-ca-file``) from the settings, or None for plaintext."""
    if settings.tls_cert_file is None and settings.tls_key_file is None:
        if settings.tls_client_ca_file is not None:
            raise StartupError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file (the server's own)")
        return None
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        raise StartupError("TLS needs both --tls-cert-file and --tls-key-file")
    ca = settings.tls_client_ca_file.read_bytes() if settings.tls_client_ca_file is not None else None
    return grpc.ssl_server_credentials([(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())],
                                       root_certificates=ca, require_client_auth=ca is not None)


async def create_server(
    settings: ServiceSettings,
    registrations: list[ServiceRegistration],
    *,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
    options: list[tuple[str, object]] | None = None,
    dependencies: list[Dependency] | None = None,
    capabilities: dict[str, Requirement] | None = None,
    instrument: tuple[str, ...] = ("metrics", "tracing"),
) -> MeshServer:
    """Build a grpc.aio server bound to ``settings.host:settings.port`` (0 binds a free port).

    ``capabilities`` maps ``""`` (the core: the server and every registered service name) and
    capability suffixes (health name ``<first service>/<suffix>``) to what each needs of
    ``dependencies``; without them the service is SERVING whenever it is warm.
    """
    metrics = _METRICS_BY_REGISTRY.get(id(registry))
    if metrics is None:
        metrics = _METRICS_BY_REGISTRY[id(registry)] = RpcMetrics(registry)
    telemetry = RpcTelemetry(metrics if "metrics" in instrument else None,
                             (tracer_provider or trace.get_tracer_provider()) if "tracing" in instrument else None)
    base = [(k, v) for k, v in (options or [("grpc.max_receive_message_length", 16 * 1024 * 1024)])
            if k != "grpc.so_reuseport"]
    server = grpc.aio.server(options=[*base, ("grpc.so_reuseport", 1 if settings.reuse_port else 0)])
    names = [r.descriptor.full_name for r in registrations]
    metrics.declare([(f"/{r.descriptor.full_name}/{m.name}", rpc_kind(m.client_streaming, m.server_streaming))
                     for r in registrations for m in r.descriptor.methods])
    server.add_generic_rpc_handlers([service_handler(r.descriptor, r.servicer, telemetry) for r in registrations])
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if settings.reflection:
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    credentials = server_credentials(settings)
    try:
        address = f"{settings.host}:{settings.port}"
        port = (server.add_secure_port(address, credentials) if credentials is not None
                else server.add_insecure_port(address))
    except RuntimeError:  # grpcio raises RuntimeError when the address cannot be bound
        port = 0
    if port == 0:
        raise StartupError(f"port {settings.port} on {settings.host} is in use (or cannot be bound): stop the "
                           "process holding it, or choose another with --port")
    monitor = DependencyMonitor(dependencies or [], interval_s=settings.health_interval_s)
    caps = dict(capabilities or {})
    core = caps.pop("", Requirement(()))
    requirements = {name: core for name in ["", *names]}
    requirements |= {f"{names[0]}/{suffix}": req for suffix, req in caps.items()}
    mesh = MeshServer(server=server, port=port, health=health_servicer, service_names=names, monitor=monitor,
                      requirements=requirements)
    monitor.on_change(mesh.refresh)
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
    A signal during start-up or warm-up stops the service as well. Failures before SERVING are
    raised as :class:`StartupError` (one line for the operator).
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        mesh, warm_up, close = await build()
    except (StartupError, SystemExit):
        raise
    except Exception as exc:
        raise StartupError(_startup_message(exc)) from exc
    try:
        await mesh.start()
        print(f"READY-PENDING port={mesh.port}", flush=True)
        warming: asyncio.Task[None] = asyncio.ensure_future(warm_up())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({warming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if warming.done():
            try:
                warming.result()
            except Exception as exc:
                await mesh.stop(0)
                raise StartupError(f"warm-up failed: {_startup_message(exc)}") from exc
            await mesh.set_serving(True)
            if settings.loop_stall_ms:  # from SERVING on: warm-up may hold the loop (a model loading holds the GIL)
                from services.runtime.loopguard import LoopWatchdog

                LoopWatchdog(settings.loop_stall_ms / 1000, type(settings).__name__,
                             settings.loop_stall_file or None).start()
            print(f"SERVING port={mesh.port} metrics_port={mesh.metrics_port}", flush=True)
            await stopping
        else:
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
        log.info("stopping: grace %.1fs", settings.grace_period_s)
        await mesh.stop(settings.grace_period_s)
    finally:
        await close()
    log.info("stopped")


def _startup_message(exc: BaseException) -> str:
    """One line for a start-up failure: the domain message when there is one, else type and text."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())


def run_service(
    settings_cls: type[ServiceSettings],
    name: str,
    create: Callable[..., Awaitable[Any]],
) -> None:
    """The body of every ``python -m services.<name>``: CLI -> settings -> logging -> tracing -> serve.

    ``create(settings, tracer_provider=...)`` returns a service object (services/bootstrap/lifecycle.py:
    ``mesh``, ``warm_up()``, ``release()``). A start-up failure (bad setting,
    taken port, missing files, a dependency refusing at start) is one line on stderr and exit code 2;
    ``--debug`` adds the traceback.
    """
    from services.runtime.logs import configure_logging
    from services.runtime.settings import fail, settings_from_cli
    from services.runtime.tracing import instrument_process, make_tracer_provider

    prog = f"python -m services.{name}"
    settings = settings_from_cli(settings_cls, prog)
    if settings.workers > 1:
        from services.runtime.workers import supervise

        supervise(f"services.{name}", prog, settings.workers, settings.port, settings.metrics_port)
    configure_logging(f"mesh-{name}", settings.log_level)
    try:
        provider = make_tracer_provider(f"mesh-{name}", settings.trace_exporter)
    except StartupError as exc:
        fail(prog, str(exc))
    instrument_process(provider)

    async def build():
        service = await create(settings, tracer_provider=provider)

        async def close() -> None:
            await service.release()
            provider.shutdown()

        return service.mesh, service.warm_up, close

    try:
        asyncio.run(serve(settings, build))
    except StartupError as exc:
        if settings.debug:
            traceback.print_exception(exc)
        fail(prog, str(exc))
