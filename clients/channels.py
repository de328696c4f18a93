"""The one way clients open gRPC channels: plaintext on a trusted network, TLS or mutual TLS when configured.

Configured from the environment, so every process (gateway, retrieval's hop to embedding, benches,
the health-check CLI) picks it up without new flags:

- ``MESH_GRPC_TLS_CA_FILE``: the CA that signed the services' certificates; set -> TLS;
- ``MESH_GRPC_TLS_CERT_FILE`` and ``MESH_GRPC_TLS_KEY_FILE``: this client's certificate and key, for
  services that require client certificates (``--tls-client-ca-file``: mutual TLS);
- ``MESH_GRPC_TLS_SERVER_NAME``: the name to check the server's certificate against when the
  target is an address the certificate does not list.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

Options = Sequence[tuple[str, Any]]


def _read(var: str) -> bytes | None:
    path = os.environ.get(var)
    return Path(path).read_bytes() if path else None


def credentials() -> grpc.ChannelCredentials | None:
    """TLS credentials from the environment, or None for plaintext."""
    ca = _read("MESH_GRPC_TLS_CA_FILE")
    if ca is None:
        return None
    cert, key = _read("MESH_GRPC_TLS_CERT_FILE"), _read("MESH_GRPC_TLS_KEY_FILE")
    if (cert is None) != (key is None):
        raise ValueError("set both MESH_GRPC_TLS_CERT_FILE and MESH_GRPC_TLS_KEY_FILE, or neither")
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def _options(options: Options) -> list[tuple[str, Any]]:
    name = os.environ.get("MESH_GRPC_TLS_SERVER_NAME")
    return [*options, ("grpc.ssl_target_name_override", name)] if name else list(options)


def aio_channel(target: str, options: Options = ()) -> grpc.aio.Channel:
    """An asyncio channel to ``target`` (TLS when configured)."""
    creds = credentials()
    if creds is None:
        return grpc.aio.insecure_channel(target, options=list(options))
    return grpc.aio.secure_channel(target, creds, options=_options(options))


def sync_channel(target: str, options: Options = ()) -> grpc.Channel:
    """A blocking channel to ``target`` (TLS when configured)."""
    creds = credentials()
    if creds is None:
        return grpc.insecure_channel(target, options=list(options))
    return grpc.secure_channel(target, creds, options=_options(options))
