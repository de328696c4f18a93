"""API keys at the gateway: ``X-API-Key`` or the stock ``Authorization: Bearer`` header.

Keys come from the environment (``MESH_GATEWAY_API_KEYS``, comma-separated) or a file
(``--api-keys-file``, one key per line), never from a command-line flag (readable in
``/proc/<pid>/cmdline``). Only their SHA-256 digests are kept in memory, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from gateway.http.errors import ApiError, error_response

ANONYMOUS = "anonymous"  # the caller's id when no keys are configured


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def key_id(key: str) -> str:
    """A key's public id: ``k-`` and the first 12 hex digits of its SHA-256 (``printf %s "$KEY" | sha256sum``).

    What usage, quotas and metrics name; the key itself is never stored, logged or shown.
    """
    return "k-" + _digest(key).hex()[:12]


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
        return self.identify(headers) is not None

    def identify(self, headers) -> str | None:
        """The id of the accepted key the request carries (:func:`key_id`), None when it carries none."""
        given = headers.get("x-api-key")
        if given is None:
            scheme, _, token = (headers.get("authorization") or "").partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if not given:
            return None
        digest = _digest(given)
        if not any(hmac.compare_digest(digest, d) for d in self._digests):
            return None
        return "k-" + digest.hex()[:12]


class RequireApiKey:
    """ASGI middleware: 401 with the standard error body unless the request carries an accepted key.

    ``/v1/`` routes always need a key when keys are configured; the operator paths (``/readyz``,
    ``/metrics``, ``/docs``, ``/openapi.json``) need one too with ``protect_ops``. ``/healthz`` never does
    (a liveness probe carries no secret).
    """

    OPS = ("/readyz", "/metrics", "/docs", "/openapi.json")

    def __init__(self, app, keys: ApiKeys, protect_ops: bool = False) -> None:
        self.app = app
        self.keys = keys
        self.protect_ops = protect_ops

    def _guarded(self, path: str) -> bool:
        return path.startswith("/v1/") or (self.protect_ops and path.startswith(self.OPS))

    async def __call__(self, scope, receive, send):  # noqa: D102
        if scope["type"] != "http" or not self.keys.enabled or not self._guarded(scope.get("path", "")):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        kid = self.keys.identify(headers)
        if kid is not None:
            scope.setdefault("state", {})["key_id"] = kid  # request.state.key_id: usage and quotas name it
            return await self.app(scope, receive, send)
        refused = ApiError(401, "unauthenticated", "missing or wrong API key (X-API-Key or Authorization: Bearer)")
        return await error_response(refused)(scope, receive, send)
