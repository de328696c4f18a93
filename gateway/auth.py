"""API keys at the gateway: ``X-API-Key`` or the stock ``Authorization: Bearer`` header.

Keys come from the environment (``MESH_GATEWAY_API_KEYS``, comma-separated) or a file
(``--api-keys-file``, one key per line), never from a command-line flag (readable in
``/proc/<pid>/cmdline``). Only their SHA-256 digests are kept in memory, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class ApiKeys:
    """The accepted keys, as digests; empty means authentication is off."""

    def __init__(self, keys: list[str]) -> None:
        self._digests = [_digest(k) for k in keys if k]

    @classmethod
    def load(cls, inline: str, file: Path | None) -> ApiKeys:
        """Keys from the comma-separated setting and the file (blank lines and ``#`` comments skipped)."""
        keys = [k.strip() for k in inline.split(",")]
        if file is not None:
            keys += [line.strip() for line in file.read_text().splitlines() if not line.strip().startswith("#")]
        return cls([k for k in keys if k])

    @property
    def enabled(self) -> bool:
        """Whether any key is configured."""
        return bool(self._digests)

    def allows(self, headers) -> bool:
        """Whether the request carries an accepted key (``X-API-Key`` or ``Authorization: Bearer``)."""
        given = headers.get("x-api-key")
        if given is None:
            scheme, _, token = (headers.get("authorization") or "").partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if not given:
            return False
        digest = _digest(given)
        return any(hmac.compare_digest(digest, d) for d in self._digests)
