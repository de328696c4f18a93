"""Backend tools: HTTP endpoints an operator declares in a file, called by the server with checked arguments.

A tool is declared once, never by a request: its name, a description the model reads, the JSON schema of
its arguments, an HTTPS URL whose host is on the file's allow-list, a timeout, a cache TTL and a
response-size bound. A call:

- checks the arguments against the schema before anything is sent (a bad call never reaches the backend);
- POSTs ``{"tool", "arguments", "caller", "key_id"}`` as JSON: ``caller`` is ``<key id>:<the session's caller id>``
  (the key id of the API key that started the session, which a request cannot choose, so two teams'
  user 1 are two callers), ``key_id`` that key id alone; never a key itself;
- signs it: ``X-Mesh-Timestamp`` (Unix seconds) and ``X-Mesh-Signature: v1=<hex HMAC-SHA256 of
  "<timestamp>." + the body's bytes>`` under the tool's ``secret``, so the backend can check that the mesh
  sent it and when (docs/features/assistant.md has a ten-line verifier);
- follows no redirect (a 3xx is an error: the allow-list would otherwise be a suggestion);
- reads at most ``max_bytes`` of the answer, within ``timeout_s`` for the whole exchange;
- is answered from a cache for ``cache_ttl_s`` when the same tool, canonical arguments and caller (key id
  and caller id) come again (30 s by default: seed 001's "identical tool calls cached for 30 s").

Plain ``http://`` is accepted only for loopback hosts (local stand-ins in tests and demos).

File format (JSON)::

    {"allowed_hosts": ["jobs.internal.example"],
     "tools": [{"name": "job_postings", "description": "...", "parameters": {JSON schema},
                "url": "https://jobs.internal.example/v1/search", "timeout_s": 3, "cache_ttl_s": 30,
                "max_bytes": 262144, "secret_env": "JOBS_TOOL_SECRET"}]}

Each tool names its signing secret: ``secret_env`` (an environment variable holding it) or ``secret`` (in the
file itself, a mounted secret); at least 16 characters. A tool without one is refused at start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema
from prometheus_client import Counter

from gateway.tasks.serving import canonical

CALLS = Counter("mesh_gateway_backend_tool_calls", "backend tool calls by outcome", ["tool", "outcome"])
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ToolFileError(ValueError):
    """The tools file is malformed (one line naming the file and the field)."""


class ToolError(Exception):
    """A call that could not be made or answered; ``kind``: arguments, redirect, too_large, timeout, http, bad_json."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class BackendTool:
    """One declared tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    url: str
    timeout_s: float = 3.0
    cache_ttl_s: float = 30.0
    max_bytes: int = 256 * 1024
    secret: bytes = b""  # the HMAC key calls are signed with

    def as_openai(self) -> dict[str, Any]:
        """The tool as a chat-completions ``tools`` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def load_backend_tools(path: Path | str) -> dict[str, BackendTool]:
    """Every tool of the file, checked (ToolFileError names the file and the field)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ToolFileError(f"{path}: cannot be read as JSON ({err})") from None
    allowed = raw.get("allowed_hosts")
    if not isinstance(allowed, list) or not all(isinstance(h, str) and h for h in allowed):
        raise ToolFileError(f"{path}: allowed_hosts must be a list of host names")
    tools: dict[str, BackendTool] = {}
    for i, entry in enumerate(raw.get("tools") or []):
        where = f"{path}: tools[{i}]"
        if not isinstance(entry, dict):
            raise ToolFileError(f"{where} must be an object")
        name = entry.get("name", "")
        if not isinstance(name, str) or not NAME.match(name) or name in tools:
            raise ToolFileError(f"{where}.name must be a new snake_case name (got {name!r})")
        params = entry.get("parameters")
        try:
            jsonschema.Draft202012Validator.check_schema(params)
        except jsonschema.SchemaError as err:
            raise ToolFileError(f"{where}.parameters is not a JSON schema: {err.message}") from None
        if not isinstance(params, dict) or params.get("type") != "object":
            raise ToolFileError(f"{where}.parameters must be an object schema")
        url = str(entry.get("url", ""))
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host not in allowed:
            raise ToolFileError(f"{where}.url: host {host!r} is not in allowed_hosts")
        if parts.scheme != "https" and not (parts.scheme == "http" and host in LOOPBACK):
            raise ToolFileError(f"{where}.url must be https:// (plain http only for a loopback host)")
        secret = entry.get("secret") or (os.environ.get(str(entry["secret_env"]), "") if "secret_env" in entry else "")
        if not isinstance(secret, str) or len(secret) < 16:
            raise ToolFileError(f"{where}: needs secret_env (an environment variable) or secret, the key its calls "
                                "are signed with, of at least 16 characters")
        try:
            tool = BackendTool(name, str(entry.get("description", "")), params, url,
                               float(entry.get("timeout_s", 3.0)), float(entry.get("cache_ttl_s", 30.0)),
                               int(entry.get("max_bytes", 256 * 1024)), secret.encode())
        except (TypeError, ValueError) as err:
            raise ToolFileError(f"{where}: {err}") from None
        if not 0 < tool.timeout_s <= 30 or not 0 <= tool.cache_ttl_s <= 3600 or not 0 < tool.max_bytes <= 8 << 20:
            raise ToolFileError(f"{where}: timeout_s in (0, 30], cache_ttl_s in [0, 3600], max_bytes in (0, 8 MiB]")
        tools[name] = tool
    return tools


def sign(secret: bytes, body: bytes, now: float | None = None) -> dict[str, str]:
    """The headers that sign ``body``: ``X-Mesh-Timestamp`` and ``X-Mesh-Signature``.

    The signature is ``v1=`` and the hex HMAC-SHA256 of ``b"<timestamp>." + body`` (a backend refuses one
    older than a few minutes: no replays).
    """
    ts = str(int(time.time() if now is None else now))
    mac = hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"X-Mesh-Timestamp": ts, "X-Mesh-Signature": f"v1={mac}"}


def verify(secret: bytes, body: bytes, timestamp: str, signature: str, now: float | None = None,
           tolerance_s: float = 300.0) -> bool:
    """What a backend checks (the verifier docs/features/assistant.md shows, here for the tests)."""
    try:
        age = abs((time.time() if now is None else now) - int(timestamp))
    except ValueError:
        return False
    expected = "v1=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return age <= tolerance_s and hmac.compare_digest(expected, signature)


class BackendTools:
    """Calls declared tools; identical calls (tool, canonical arguments, caller) answered from a TTL cache."""

    def __init__(self, tools: dict[str, BackendTool], max_cached: int = 10_000) -> None:
        self.tools = tools
        self.max_cached = max_cached
        self._cache: dict[str, tuple[float, Any]] = {}
        self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False)

    async def close(self) -> None:
        """Release the HTTP connections."""
        await self._http.aclose()

    def check(self, name: str, arguments: Any) -> BackendTool:
        """The tool, once ``arguments`` match its schema (ToolError ``arguments`` otherwise)."""
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError("unknown_tool", f"no backend tool {name!r}")
        try:
            jsonschema.validate(arguments, tool.parameters)
        except jsonschema.ValidationError as err:
            raise ToolError("arguments", f"{name}: {err.message}"[:300]) from None
        return tool

    async def call(self, name: str, arguments: dict[str, Any], key_id: str, caller: str) -> tuple[Any, bool]:
        """The backend's JSON answer and whether it came from the cache.

        ``key_id``: the API key's id that owns the session; ``caller``: the session's caller id. The backend
        is sent ``<key_id>:<caller>``, and the cache keeps one entry per both.
        """
        tool = self.check(name, arguments)
        who = f"{key_id}:{caller}"
        key = canonical([name, arguments, who])
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            CALLS.labels(name, "cached").inc()
            return hit[1], True
        try:
            value = await self._post(tool, {"tool": name, "arguments": arguments, "caller": who, "key_id": key_id})
        except ToolError as err:
            CALLS.labels(name, err.kind).inc()
            raise
        CALLS.labels(name, "ok").inc()
        if tool.cache_ttl_s > 0:
            if len(self._cache) >= self.max_cached:
                for k in [k for k, (until, _) in self._cache.items() if until <= now] or [next(iter(self._cache))]:
                    del self._cache[k]
            self._cache[key] = (now + tool.cache_ttl_s, value)
        return value, False

    async def _post(self, tool: BackendTool, body: dict[str, Any]) -> Any:
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **sign(tool.secret, content)}

        async def exchange() -> Any:
            async with self._http.stream("POST", tool.url, content=content, headers=headers,
                                         timeout=tool.timeout_s) as resp:
                if resp.is_redirect:
                    raise ToolError("redirect", f"{tool.name}: the backend answered {resp.status_code} (redirects "
                                                "are not followed)")
                if resp.status_code >= 400:
                    raise ToolError("http", f"{tool.name}: the backend answered {resp.status_code}")
                data = bytearray()
                async for chunk in resp.aiter_bytes():
                    data += chunk
                    if len(data) > tool.max_bytes:
                        raise ToolError("too_large", f"{tool.name}: the answer is over {tool.max_bytes} bytes")
            try:
                return json.loads(bytes(data))
            except ValueError:
                raise ToolError("bad_json", f"{tool.name}: the answer is not JSON") from None

        try:
            return await asyncio.wait_for(exchange(), tool.timeout_s)
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError("timeout", f"{tool.name}: no answer within {tool.timeout_s:g} s") from None
        except httpx.HTTPError as err:
            raise ToolError("http", f"{tool.name}: {type(err).__name__}") from None
