"""``python -m gateway``: CLI -> settings -> uvicorn."""

from __future__ import annotations

import logging
import socket

import uvicorn

from gateway.app import create_app
from gateway.config import GatewaySettings
from services.bootstrap.settings import fail, settings_from_cli

PROG = "python -m gateway"


def main() -> None:
    """Serve the gateway until SIGTERM; a start-up failure is one line and exit code 2."""
    settings = settings_from_cli(GatewaySettings, PROG)  # type: ignore[type-var]
    logging.basicConfig(level=settings.log_level, format="%(message)s")
    # proto must say TCP: asyncio only sets TCP_NODELAY on accepted sockets whose listener does
    # (without it, Nagle + delayed ACK add ~40 ms to every response).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))  # port 0 picks a free one; we print the real one
    except OSError as exc:
        sock.close()
        fail(PROG, f"port {settings.port} on {settings.host} cannot be bound ({exc.strerror}): stop the process "
                   "holding it, or choose another with --port")
    sock.listen(2048)  # connections queue from now on, so SERVING is true when printed
    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    print(f"SERVING port={sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
