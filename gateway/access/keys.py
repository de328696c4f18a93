"""API keys and what each may do: the plain list (every key all-access) or a keys file with scopes.

A key file is either one key per line (blank lines and ``#`` comments skipped: each key may do
everything), or YAML/JSON with scopes per key::

    keys:
      - sha256: 9f86d081884c7d65…          # the key's SHA-256 (printf %s "$KEY" | sha256sum), or `key: <secret>`
        id: books-team                    # optional: the public id usage, quotas and ownership name
                                          # (default: k- and the first 12 hex digits of the SHA-256)
        groups: [search, llm, files]      # route groups (default: all): search, llm, files, admin
        collections:                      # names, or prefixes ending in * (default: all)
          read: [books, "books-*"]
          write: ["books-*"]
        models: [local]                   # model routes (default: all)

The file is read again when its modification time changes (looked at once a second at most); a file
that does not parse keeps the keys before it, logged once per change. Only the keys' SHA-256 digests
are kept in memory, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.watched_file import WatchedFile

ANONYMOUS = "anonymous"  # the caller's id when no keys are configured
GROUPS = ("search", "llm", "files", "admin")
Group = Literal["search", "llm", "files", "admin"]


class KeyFileError(ValueError):
    """The keys file at start-up does not parse (one line naming the file and what is wrong)."""


def digest(key: str) -> bytes:
    """A key's SHA-256."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def key_id(key: str) -> str:
    """A key's default public id: ``k-`` and the first 12 hex digits of its SHA-256 (``printf %s "$KEY" | sha256sum``).

    What usage, quotas, ownership and metrics name; the key itself is never stored, logged or shown.
    """
    return "k-" + digest(key).hex()[:12]


def _matches(name: str, patterns: tuple[str, ...] | None) -> bool:
    if patterns is None:
        return True
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a key's id and what it may do (None: no limit of that kind)."""

    id: str
    groups: frozenset[str] | None = None
    read: tuple[str, ...] | None = None
    write: tuple[str, ...] | None = None
    models: tuple[str, ...] | None = None

    def may_call(self, group: str) -> bool:
        """Whether the key may call routes of ``group``."""
        return self.groups is None or group in self.groups

    def may_read(self, collection: str) -> bool:
        """Whether the key may search or read ``collection`` (writing implies reading)."""
        return _matches(collection, self.read) or (self.write is not None and _matches(collection, self.write))

    def may_write(self, collection: str) -> bool:
        """Whether the key may add to or delete from ``collection``."""
        return _matches(collection, self.write)

    def may_use(self, model_route: str) -> bool:
        """Whether the key may call model route ``model_route``."""
        return _matches(model_route, self.models)


SYSTEM = Principal("system")  # the gateway's own work outside any request (start-up, warm-up)
ALL_ACCESS = Principal(ANONYMOUS)  # every request when no keys are configured
NOBODY = Principal("unauthenticated", frozenset(), (), (), ())  # an open path (/healthz) while keys are on


class Collections(BaseModel):
    """Collections a key may read and write: names, or prefixes ending in ``*``."""

    model_config = ConfigDict(extra="forbid")
    read: list[str] | None = None
    write: list[str] = Field(default_factory=list)


class KeyEntry(BaseModel):
    """One key of the file."""

    model_config = ConfigDict(extra="forbid")
    key: str | None = Field(None, min_length=8, description="the secret itself (prefer sha256)")
    sha256: str | None = Field(None, pattern="^[0-9a-fA-F]{64}$")
    id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    groups: list[Group] | None = None
    collections: Collections | None = None
    models: list[str] | None = None

    @model_validator(mode="after")
    def _one_secret(self) -> KeyEntry:
        if (self.key is None) == (self.sha256 is None):
            raise ValueError("each key needs exactly one of key or sha256")
        return self

    def principal(self) -> tuple[bytes, Principal]:
        """Its digest and principal."""
        raw = digest(self.key) if self.key is not None else bytes.fromhex(self.sha256 or "")
        cols = self.collections
        return raw, Principal(
            self.id or "k-" + raw.hex()[:12],
            frozenset(self.groups) if self.groups is not None else None,
            tuple(cols.read) if cols is not None and cols.read is not None else (() if cols is not None else None),
            tuple(cols.write) if cols is not None else None,
            tuple(self.models) if self.models is not None else None)


class KeyFile(BaseModel):
    """The scoped file's fields."""

    model_config = ConfigDict(extra="forbid")
    keys: list[KeyEntry]


def parse_keys(text: str) -> list[tuple[bytes, Principal]]:
    """The (digest, principal) pairs of a keys file: a plain list (all-access) or scoped YAML/JSON."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("keys:") or "\nkeys:" in text:
        raw: Any = json.loads(text) if stripped.startswith("{") else yaml.safe_load(text)
        entries = [e.principal() for e in KeyFile.model_validate(raw or {}).keys]
        ids = [p.id for _, p in entries]
        if len(set(ids)) != len(ids):
            raise ValueError("two keys share one id")
        return entries
    keys = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(digest(k), Principal(key_id(k))) for k in keys]


class ApiKeys:
    """The accepted keys (from the environment and the keys file), as digests; empty means authentication is off."""

    def __init__(self, inline: list[str], file: Path | None = None) -> None:
        self._inline = [(digest(k), Principal(key_id(k))) for k in inline if k]
        self.file = file
        self._file: WatchedFile[list[tuple[bytes, Principal]]] = WatchedFile(file, parse_keys, [], "API keys file",
                                                                                KeyFileError)

    @classmethod
    def load(cls, inline: str, file: Path | None) -> ApiKeys:
        """Keys from the comma-separated setting and the file."""
        return cls([k.strip() for k in inline.split(",") if k.strip()], file)

    @property
    def _from_file(self) -> list[tuple[bytes, Principal]]:
        return self._file.value

    @property
    def enabled(self) -> bool:
        """Whether any key is configured."""
        return bool(self._inline or self._from_file)

    def allows(self, headers: Any) -> bool:
        """Whether the request carries an accepted key."""
        return self.identify(headers) is not None

    def by_id(self, kid: str) -> Principal | None:
        """The principal of a key id (a job's owner, run later by a worker); None when no key has it now."""
        if not self.enabled:
            return ALL_ACCESS if kid == ANONYMOUS else None
        return next((p for _, p in [*self._inline, *self._from_file] if p.id == kid), None)

    def identify(self, headers: Any) -> Principal | None:
        """The principal of the accepted key the request carries (``X-API-Key`` or ``Authorization: Bearer``)."""
        given = headers.get("x-api-key")
        if given is None:
            scheme, _, token = (headers.get("authorization") or "").partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if not given:
            return None
        wanted = digest(given)
        found = None
        for d, principal in [*self._inline, *self._from_file]:  # every digest compared: no early exit
            if hmac.compare_digest(wanted, d) and found is None:
                found = principal
        return found
