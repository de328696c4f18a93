"""``python -m gateway``: CLI -> settings -> uvicorn."""

from __future__ import annotations

import socket
from pathlib import Path

import uvicorn
from prometheus_client import start_http_server

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.http.auth import ApiKeys
from gateway.http.protocol import protocol_with_timeout
from gateway.usage.quotas import QuotaFileError, Quotas
from services.runtime.errors import StartupError
from services.runtime.logs import configure_logging
from services.runtime.settings import fail, settings_from_cli
from services.runtime.tasks.spec import BUILTIN_DIR, TaskFileError, load_tasks
from services.runtime.tracing import instrument_process, make_tracer_provider

PROG = "python -m gateway"


def main() -> None:
    """Serve the gateway until SIGTERM; a start-up failure is one line and exit code 2."""
    settings = settings_from_cli(GatewaySettings, PROG)  # type: ignore[type-var]
    if not settings.allow_no_auth and not ApiKeys.load(settings.api_keys.get_secret_value(),
                                                       settings.api_keys_file).enabled:
        fail(PROG, "no API key configured: set MESH_GATEWAY_API_KEYS or --api-keys-file (a mounted secret), "
                   "or pass --allow-no-auth (MESH_GATEWAY_ALLOW_NO_AUTH=1) for local development")
    try:  # a bad task file is one line naming the file and the field, before anything starts
        load_tasks([BUILTIN_DIR, *map(Path, settings.task_dirs())])
    except TaskFileError as err:
        fail(PROG, f"task file {err}")
    try:
        Quotas(settings.quotas_file)
    except QuotaFileError as err:
        fail(PROG, f"quotas file {err}")
    if settings.workers > 1:
        from services.runtime.workers import supervise

        supervise("gateway", PROG, settings.workers, settings.port, settings.metrics_port)
    configure_logging("mesh-gateway", settings.log_level)
    try:
        provider = make_tracer_provider("mesh-gateway", settings.trace_exporter)
    except StartupError as exc:
        fail(PROG, str(exc))
    instrument_process(provider)
    # proto must say TCP: asyncio only sets TCP_NODELAY on accepted sockets whose listener does
    # (without it, Nagle + delayed ACK add ~40 ms to every response).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if settings.reuse_port:  # a worker of `--workers N`: the kernel spreads connections over the workers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((settings.host, settings.port))  # port 0 picks a free one; we print the real one
    except OSError as exc:
        sock.close()
        fail(PROG, f"port {settings.port} on {settings.host} cannot be bound ({exc.strerror}): stop the process "
                   "holding it, or choose another with --port")
    sock.listen(2048)  # connections queue from now on, so SERVING is true when printed
    metrics_port = None
    if settings.metrics_port >= 0:  # each worker's own endpoint: the shared port's /metrics is one worker's
        try:
            metrics_http, _thread = start_http_server(settings.metrics_port, addr=settings.host)
        except OSError as exc:
            fail(PROG, f"metrics port {settings.metrics_port} on {settings.host} cannot be bound ({exc.strerror}): "
                       "stop the process holding it, or choose another with --metrics-port")
        metrics_port = metrics_http.server_address[1]
    if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
        fail(PROG, "HTTPS needs both --tls-cert-file and --tls-key-file")
    config = uvicorn.Config(create_app(settings, tracer_provider=provider), log_level="warning", access_log=False,
                            log_config=None, timeout_graceful_shutdown=5, limit_concurrency=settings.max_connections,
                            ssl_certfile=settings.tls_cert_file, ssl_keyfile=settings.tls_key_file,
                            http=protocol_with_timeout(settings.header_timeout_s))
    print(f"SERVING port={sock.getsockname()[1]} metrics_port={metrics_port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
