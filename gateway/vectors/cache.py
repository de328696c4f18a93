"""Query-embedding cache: Redis shared by every gateway instance, or an in-process LRU.

Key: model revision + kind + NFKC-normalised, whitespace-collapsed text (hashed); value: float32
bytes. Redis is fail-open: any Redis error is counted and treated as a miss; it is logged once
when Redis goes away and once when it is back, never once per request.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import unicodedata
from abc import ABC, abstractmethod
from collections import OrderedDict

import numpy as np
from prometheus_client import Counter

log = logging.getLogger(__name__)

CACHE_EVENTS = Counter("mesh_gateway_embedding_cache", "embedding cache lookups and failures", ["event"])
for _event in ("hit", "miss", "error"):
    CACHE_EVENTS.labels(_event)  # every series exists from the start


def cache_key(revision: str, kind: str, text: str) -> str:
    """``emb:<revision>:<kind>:<sha256 of normalised text>``."""
    norm = " ".join(unicodedata.normalize("NFKC", text).split())
    return f"emb:{revision}:{kind}:{hashlib.sha256(norm.encode()).hexdigest()}"


class EmbeddingCache(ABC):
    """get/set of float32 vectors; the backend is Redis or an LRU."""

    remote = False  # whether a set costs a network round trip (then callers need not wait for it)

    @abstractmethod
    async def get(self, key: str) -> np.ndarray | None:
        """The cached vector or None."""

    @abstractmethod
    async def set(self, key: str, vector: np.ndarray) -> None:
        """Store a vector."""

    async def get_many(self, keys: list[str]) -> list[np.ndarray | None]:
        """The cached vector (or None) of each key, in order."""
        return [await self.get(k) for k in keys]

    async def health(self, timeout_s: float = 0.5) -> str:
        """``SERVING`` when the cache answers (an in-process cache always does), else ``UNREACHABLE``."""
        return "SERVING"

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class LocalLruCache(EmbeddingCache):
    """In-process LRU (the embedded default when no Redis is configured)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, bytes] = OrderedDict()

    async def get(self, key: str) -> np.ndarray | None:  # noqa: D102
        raw = self._data.get(key)
        if raw is None:
            CACHE_EVENTS.labels("miss").inc()
            return None
        self._data.move_to_end(key)
        CACHE_EVENTS.labels("hit").inc()
        return np.frombuffer(raw, dtype=np.float32)

    async def set(self, key: str, vector: np.ndarray) -> None:  # noqa: D102
        self._data[key] = np.asarray(vector, dtype=np.float32).tobytes()
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)


class RedisCache(EmbeddingCache):
    """Redis with a TTL per entry; the LRU cap is Redis' own (``maxmemory-policy allkeys-lru``)."""

    remote = True

    def __init__(self, url: str, ttl_s: int, timeout_s: float = 0.05) -> None:
        import redis.asyncio as redis

        self.ttl_s = ttl_s
        self._redis = redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self._down = False

    def _failed(self, op: str, exc: Exception) -> None:
        CACHE_EVENTS.labels("error").inc()
        if not self._down:
            self._down = True
            log.warning("redis %s failed (%s); continuing without the shared cache until it answers again",
                        op, type(exc).__name__)

    def _answered(self) -> None:
        if self._down:
            self._down = False
            log.info("redis answers again; shared cache back")

    async def get(self, key: str) -> np.ndarray | None:  # noqa: D102
        try:
            raw = await self._redis.get(key)
        except Exception as exc:  # noqa: BLE001 - fail open on any Redis trouble
            self._failed("get", exc)
            return None
        self._answered()
        CACHE_EVENTS.labels("hit" if raw else "miss").inc()
        return None if raw is None else np.frombuffer(raw, dtype=np.float32)  # type: ignore[arg-type]

    async def get_many(self, keys: list[str]) -> list[np.ndarray | None]:  # noqa: D102 - one MGET round trip
        if len(keys) == 1:
            return [await self.get(keys[0])]
        try:
            raws = await self._redis.mget(keys)
        except Exception as exc:  # noqa: BLE001 - fail open
            self._failed("mget", exc)
            return [None] * len(keys)
        self._answered()
        for raw in raws:
            CACHE_EVENTS.labels("hit" if raw else "miss").inc()
        return [None if raw is None else np.frombuffer(raw, dtype=np.float32) for raw in raws]  # type: ignore[arg-type]

    async def set(self, key: str, vector: np.ndarray) -> None:  # noqa: D102
        try:
            await self._redis.set(key, np.asarray(vector, dtype=np.float32).tobytes(), ex=self.ttl_s)
        except Exception as exc:  # noqa: BLE001
            self._failed("set", exc)
            return
        self._answered()

    async def health(self, timeout_s: float = 0.5) -> str:  # noqa: D102
        try:
            await asyncio.wait_for(self._redis.ping(), timeout_s)
        except Exception:  # noqa: BLE001 - any failure means unreachable
            return "UNREACHABLE"
        return "SERVING"

    async def close(self) -> None:  # noqa: D102
        await self._redis.aclose()
