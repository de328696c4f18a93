"""``python -m gateway``: CLI -> settings -> uvicorn."""

from __future__ import annotations

import logging
import socket

import uvicorn

from gateway.app import create_app
from gateway.config import GatewaySettings
from services.bootstrap.settings import settings_from_cli


def main() -> None:
    """Serve the gateway until SIGTERM."""
    settings = settings_from_cli(GatewaySettings, "python -m gateway")  # type: ignore[type-var]
    logging.basicConfig(level=settings.log_level, format="%(message)s")
    # proto must say TCP: asyncio only sets TCP_NODELAY on accepted sockets whose listener does
    # (without it, Nagle + delayed ACK add ~40 ms to every response).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))  # port 0 picks a free one; we print the real one
    sock.listen(2048)  # connections queue from now on, so SERVING is true when printed
    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5)
    print(f"SERVING port={sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
