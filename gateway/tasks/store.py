"""The state tasks keep: cached results and interview records, in Redis or, without one, in this process.

Redis is shared by every gateway instance; the in-process store is not.

Only what the two users need: strings with a TTL (the response cache) and hashes whose fields are
claimed once (``hsetnx``: an interview's questions and answers, so two instances can never record two
answers to one question). Every Redis call has a socket timeout; callers decide whether an error
fails open (the cache) or fails the request (interviews, whose state must not be lost silently).
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from collections import OrderedDict, defaultdict
from collections.abc import Callable

from gateway.access.context import owns


class StoreUnavailable(Exception):
    """The store did not answer (Redis down or slow)."""


class KeyValue(ABC):
    """Strings and hashes with TTLs."""

    shared = False  # whether other gateway instances see the same data

    @abstractmethod
    async def get(self, key: str) -> str | None:
        """The string at ``key`` or None."""

    @abstractmethod
    async def set(self, key: str, value: str, ttl_s: int) -> None:
        """Store a string for ``ttl_s`` seconds."""

    @abstractmethod
    async def hsetnx(self, key: str, field: str, value: str, ttl_s: int) -> bool:
        """Set ``field`` of hash ``key`` unless it exists (True when set); the hash lives ``ttl_s`` more."""

    @abstractmethod
    async def hsetnx_unless(self, key: str, field: str, value: str, ttl_s: int, guard: str) -> bool | None:
        """Set ``field`` only if neither it nor ``guard`` is in the hash, atomically (one script on Redis).

        True: set; False: ``field`` was there; None: ``guard`` was there (nothing written).
        """

    @abstractmethod
    async def hset(self, key: str, field: str, value: str, ttl_s: int) -> None:
        """Set ``field`` of hash ``key``; the hash lives ``ttl_s`` more."""

    @abstractmethod
    async def hmove(self, key: str, field: str, to: str, ttl_s: int) -> bool | None:
        """Rename ``field`` to ``to`` within hash ``key``, atomically (one script on Redis).

        True: moved; None: ``field`` was not there; False: ``to`` was (nothing changed).
        """

    @abstractmethod
    async def hdel(self, key: str, field: str) -> None:
        """Remove ``field`` of hash ``key``."""

    @abstractmethod
    async def hgetall(self, key: str) -> dict[str, str]:
        """Every field of hash ``key`` ({} when there is none)."""

    async def hlen(self, key: str) -> int:
        """How many fields hash ``key`` has (0 when there is none)."""
        return len(await self.hgetall(key))

    @abstractmethod
    async def ttl(self, key: str) -> int:
        """Seconds ``key`` has left (0 when gone)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


async def session_hash(store: KeyValue, key: str, sid: str) -> dict[str, str]:
    """The hash of a session whose id the gateway made (32 hex digits), if the caller owns it.

    {} for any other id (never looked up) and for another key's session (its meta's ``owner``,
    gateway/access/context.py).

    StoreUnavailable when the store does not answer.
    """
    if len(sid) != 32 or any(c not in "0123456789abcdef" for c in sid):
        return {}
    fields = await store.hgetall(key)
    if "meta" in fields and not owns(json.loads(fields["meta"]).get("owner")):
        return {}  # another key's session: answered as one that does not exist
    return fields


def numbered(fields: dict[str, str], prefix: str = "t:") -> dict[int, dict]:
    """A session hash's numbered entries (``t:1``, ``t:2`` …) as JSON values by number."""
    return {int(k[len(prefix):]): json.loads(v) for k, v in fields.items() if k.startswith(prefix)}


class MemoryKeyValue(KeyValue):
    """In this process (the embedded default without Redis); expired keys are dropped when touched.

    At most ``max_keys`` keys of each kind (the key's prefix before ``:``: ``interview``, ``conversation``,
    a task's cache …): when a kind is full, its expired keys go, then its least recently used one, so
    one kind never pushes out another's entries.
    """

    def __init__(self, max_keys: int = 10000, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_keys = max_keys
        self.clock = clock
        self._data: dict[str, OrderedDict[str, tuple[float, str | dict[str, str]]]] = defaultdict(OrderedDict)

    @staticmethod
    def _kind(key: str) -> str:
        return key.split(":", 1)[0]

    def _live(self, key: str) -> str | dict[str, str] | None:
        kind = self._data[self._kind(key)]
        entry = kind.get(key)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del kind[key]
            return None
        kind.move_to_end(key)  # used now
        return entry[1]

    def _put(self, key: str, value: str | dict[str, str], ttl_s: int) -> None:
        kind = self._data[self._kind(key)]
        if key not in kind and len(kind) >= self.max_keys:
            now = self.clock()
            for k in [k for k, (expiry, _) in kind.items() if expiry <= now]:
                del kind[k]
            if len(kind) >= self.max_keys:  # still full: the least recently used of this kind goes
                kind.popitem(last=False)
        kind[key] = (self.clock() + ttl_s, value)
        kind.move_to_end(key)

    def _hash(self, key: str) -> dict[str, str]:
        value = self._live(key)
        return dict(value) if isinstance(value, dict) else {}

    async def get(self, key: str) -> str | None:  # noqa: D102
        value = self._live(key)
        return value if isinstance(value, str) else None

    async def set(self, key: str, value: str, ttl_s: int) -> None:  # noqa: D102
        self._put(key, value, ttl_s)

    async def hsetnx(self, key: str, field: str, value: str, ttl_s: int) -> bool:  # noqa: D102
        fields = self._hash(key)
        if field in fields:
            return False
        fields[field] = value
        self._put(key, fields, ttl_s)
        return True

    async def hsetnx_unless(self, key: str, field: str, value: str, ttl_s: int,  # noqa: D102
                            guard: str) -> bool | None:
        fields = self._hash(key)  # nothing awaits in between: atomic in this process
        if guard in fields:
            return None
        return await self.hsetnx(key, field, value, ttl_s)

    async def hset(self, key: str, field: str, value: str, ttl_s: int) -> None:  # noqa: D102
        fields = self._hash(key)
        fields[field] = value
        self._put(key, fields, ttl_s)

    async def hmove(self, key: str, field: str, to: str, ttl_s: int) -> bool | None:  # noqa: D102
        fields = self._hash(key)  # nothing awaits in between: atomic in this process
        if field not in fields:
            return None
        if to in fields:
            return False
        fields[to] = fields.pop(field)
        self._put(key, fields, ttl_s)
        return True

    async def hdel(self, key: str, field: str) -> None:  # noqa: D102
        entry = self._data[self._kind(key)].get(key)
        if entry is not None and isinstance(entry[1], dict):
            entry[1].pop(field, None)

    async def hgetall(self, key: str) -> dict[str, str]:  # noqa: D102
        return self._hash(key)

    async def ttl(self, key: str) -> int:  # noqa: D102
        entry = self._data[self._kind(key)].get(key)
        return max(0, math.ceil(entry[0] - self.clock())) if entry and self._live(key) is not None else 0


# KEYS[1] the hash; ARGV: field, value, ttl, guard. -1: the guard is there; 0: the field is; 1: set.
HSETNX_UNLESS = """
if redis.call('HEXISTS', KEYS[1], ARGV[4]) == 1 then return -1 end
local set = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return set
"""

# KEYS[1] the hash; ARGV: field, to, ttl. -1: no field; 0: ``to`` is there; 1: moved.
HMOVE = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return -1 end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], value)
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""


class RedisKeyValue(KeyValue):
    """Redis; each write sets the TTL in the same round trip (MULTI)."""

    shared = True

    def __init__(self, url: str, timeout_s: float = 0.5) -> None:
        import redis.asyncio as redis

        self._redis = redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                     decode_responses=True)
        self._hsetnx_unless = self._redis.register_script(HSETNX_UNLESS)  # EVALSHA: the script sent once
        self._hmove = self._redis.register_script(HMOVE)

    async def _call(self, op):
        try:
            return await op
        except Exception as exc:  # noqa: BLE001 - every Redis failure is one kind to the callers
            raise StoreUnavailable(f"redis: {type(exc).__name__}") from None

    async def get(self, key: str) -> str | None:  # noqa: D102
        return await self._call(self._redis.get(key))

    async def set(self, key: str, value: str, ttl_s: int) -> None:  # noqa: D102
        await self._call(self._redis.set(key, value, ex=ttl_s))

    async def hsetnx(self, key: str, field: str, value: str, ttl_s: int) -> bool:  # noqa: D102
        pipe = self._redis.pipeline(transaction=True)
        pipe.hsetnx(key, field, value)
        pipe.expire(key, ttl_s)
        created, _ = await self._call(pipe.execute())
        return bool(created)

    async def hsetnx_unless(self, key: str, field: str, value: str, ttl_s: int,  # noqa: D102
                            guard: str) -> bool | None:
        got = await self._call(self._hsetnx_unless(keys=[key], args=[field, value, ttl_s, guard]))
        return None if int(got) < 0 else bool(int(got))

    async def hset(self, key: str, field: str, value: str, ttl_s: int) -> None:  # noqa: D102
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(key, field, value)
        pipe.expire(key, ttl_s)
        await self._call(pipe.execute())

    async def hdel(self, key: str, field: str) -> None:  # noqa: D102
        await self._call(self._redis.hdel(key, field))

    async def hmove(self, key: str, field: str, to: str, ttl_s: int) -> bool | None:  # noqa: D102
        got = int(await self._call(self._hmove(keys=[key], args=[field, to, ttl_s])))
        return None if got < 0 else bool(got)

    async def hgetall(self, key: str) -> dict[str, str]:  # noqa: D102
        return await self._call(self._redis.hgetall(key))

    async def hlen(self, key: str) -> int:  # noqa: D102 - the count alone, not the fields
        return int(await self._call(self._redis.hlen(key)))

    async def ttl(self, key: str) -> int:  # noqa: D102
        return max(0, int(await self._call(self._redis.ttl(key))))

    async def close(self) -> None:  # noqa: D102
        await self._redis.aclose()
