"""Ports on loopback: a free one for a server that cannot bind port 0, or one held by a listening socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers that cannot bind port 0 themselves).

    Nothing listens on it either, so it also stands for a dependency that is down (connection refused).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def listening_socket(port: int = 0) -> Iterator[socket.socket]:
    """A TCP socket listening on 127.0.0.1 on ``port`` (0: one the system chose), closed afterwards.

    For a port another program already holds, or a socket handed to a server (no race for the port).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen(1)
        yield sock


@contextmanager
def held_port(port: int = 0) -> Iterator[int]:
    """A port (``port``, or one the system chose) held by a plain listening socket for the block
    (another program on the port)."""
    with listening_socket(port) as sock:
        yield sock.getsockname()[1]
