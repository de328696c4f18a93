"""Usage per caller and quota state: hourly counters per key and per-period leases, in Redis or in process.

Counters: one hash per key and UTC hour, ``usage:<key>:<YYYYMMDDHH>``, fields of route, model and metric
joined by :data:`SEP` (requests, prompt_tokens, completion_tokens, cached_prompt_tokens, cost_usd), kept
``RETENTION_S`` (90 days): a caller's report reads its own hashes only, whatever the number of tenants.

Quotas: one hash per key and period, ``quota:<key>:<d|m>:<period>`` with ``used`` tokens and ``cost_micro``,
and a sorted set beside it, ``…:held``, of the reservations in flight (member ``<lease id>:<tokens>``, score
the moment the lease ends). A request is admitted by one Lua script (Redis runs it atomically, so gateway
instances never race): the leases that ended are dropped, then it is refused when a period's ``used +
held`` has reached the limit, else it holds an estimate in every period under a lease of ``lease_s``; when
it ends, its lease is removed and the real tokens added. A gateway killed mid-request leaves its leases to
end by themselves (``--quota-lease-s``), not for the rest of the period; a request that outlives its lease
is still settled in full, it only stops holding room for itself. Every write sets the period's expiry.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass

RETENTION_S = 90 * 86400
SEP = "\x1f"
METRICS = ("requests", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cost_usd")


@dataclass(frozen=True)
class Period:
    """One quota window of a key: its hash key, its token limit (0: none), its cost limit (0: none), its TTL."""

    key: str
    tokens: int
    cost_micro: int
    ttl_s: int


# KEYS: per period its hash and its held set. ARGV: estimate, lease member, now_ms, lease end ms, then per
# period (tokens, cost_micro, ttl_s).
RESERVE = """
local est = tonumber(ARGV[1])
local now = tonumber(ARGV[3])
local n = #KEYS / 2
for i = 1, n do
  local key, held_key = KEYS[2 * i - 1], KEYS[2 * i]
  local tokens = tonumber(ARGV[2 + 3 * i])
  local cost = tonumber(ARGV[3 + 3 * i])
  redis.call('ZREMRANGEBYSCORE', held_key, '-inf', now)
  local held = 0
  for _, m in ipairs(redis.call('ZRANGE', held_key, 0, -1)) do
    held = held + tonumber(string.match(m, ':(%d+)$') or '0')
  end
  local used = tonumber(redis.call('HGET', key, 'used') or '0')
  local spent = tonumber(redis.call('HGET', key, 'cost_micro') or '0')
  if (tokens > 0 and used + held >= tokens) or (cost > 0 and spent >= cost) then
    return i
  end
end
for i = 1, n do
  local key, held_key = KEYS[2 * i - 1], KEYS[2 * i]
  local ttl = tonumber(ARGV[4 + 3 * i])
  redis.call('ZADD', held_key, tonumber(ARGV[4]), ARGV[2] .. ':' .. est)
  redis.call('EXPIRE', held_key, ttl)
  redis.call('HSETNX', key, 'used', 0)
  redis.call('EXPIRE', key, ttl)
end
return 0
"""
# KEYS: per period its hash and its held set. ARGV: lease member ('' none), tokens, cost_micro, then per
# period ttl_s.
SETTLE = """
for i = 1, #KEYS / 2 do
  local key, held_key = KEYS[2 * i - 1], KEYS[2 * i]
  if ARGV[1] ~= '' then
    redis.call('ZREM', held_key, ARGV[1])
  end
  redis.call('HINCRBY', key, 'used', tonumber(ARGV[2]))
  redis.call('HINCRBY', key, 'cost_micro', tonumber(ARGV[3]))
  redis.call('EXPIRE', key, tonumber(ARGV[3 + i]))
end
return 0
"""


def hour_of(unix_s: float) -> str:
    """The UTC hour a moment falls in, as the counters name it."""
    return time.strftime("%Y%m%d%H", time.gmtime(unix_s))


def _keys(periods: list[Period]) -> list[str]:
    return [k for p in periods for k in (p.key, f"{p.key}:held")]


class Ledger(ABC):
    """Usage counters and quota reservations."""

    @abstractmethod
    async def add(self, key: str, hour: str, counts: dict[str, float]) -> None:
        """Add to a key's hour counters (fields as :data:`SEP`-joined route, model, metric)."""

    @abstractmethod
    async def hours(self, key: str, hours: list[str]) -> dict[str, dict[str, float]]:
        """A key's counters of each hour that has any."""

    @abstractmethod
    async def reserve(self, periods: list[Period], estimate: int, lease: str, lease_s: float) -> int:
        """0 when admitted, else the 1-based index of the full period.

        Admitted: ``estimate`` is held in every period under ``lease`` for ``lease_s``.
        """

    @abstractmethod
    async def settle(self, periods: list[Period], lease: str, estimate: int, tokens: int, cost_micro: int) -> None:
        """End a lease (``lease`` '' for none: work counted after its request) and add what was used."""

    @abstractmethod
    async def period(self, key: str) -> dict[str, int]:
        """A period's ``used``, ``reserved`` (held by live leases) and ``cost_micro``."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class MemoryLedger(Ledger):
    """In this process (no Redis): the same rules, atomic because nothing awaits inside an update."""

    def __init__(self, clock=time.time) -> None:
        self._hours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._periods: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._held: dict[str, dict[str, tuple[int, float]]] = defaultdict(dict)  # period -> lease -> (tokens, ends)
        self.clock = clock

    async def add(self, key: str, hour: str, counts: dict[str, float]) -> None:  # noqa: D102
        for name, value in counts.items():
            self._hours[f"{key}:{hour}"][name] += value

    async def hours(self, key: str, hours: list[str]) -> dict[str, dict[str, float]]:  # noqa: D102
        return {h: dict(self._hours[f"{key}:{h}"]) for h in hours if f"{key}:{h}" in self._hours}

    def _live(self, period: str) -> int:
        now = self.clock()
        held = self._held[period]
        for lease in [k for k, (_, ends) in held.items() if ends <= now]:
            del held[lease]
        return sum(t for t, _ in held.values())

    async def reserve(self, periods: list[Period], estimate: int, lease: str, lease_s: float) -> int:  # noqa: D102
        for i, p in enumerate(periods, 1):
            state = self._periods[p.key]
            if (p.tokens and state["used"] + self._live(p.key) >= p.tokens) or \
                    (p.cost_micro and state["cost_micro"] >= p.cost_micro):
                return i
        for p in periods:
            self._held[p.key][lease] = (estimate, self.clock() + lease_s)
        return 0

    async def settle(self, periods: list[Period], lease: str, estimate: int, tokens: int,  # noqa: D102
                     cost_micro: int) -> None:
        for p in periods:
            self._held[p.key].pop(lease, None)
            state = self._periods[p.key]
            state["used"] += tokens
            state["cost_micro"] += cost_micro

    async def period(self, key: str) -> dict[str, int]:  # noqa: D102
        out = dict(self._periods.get(key, {}))
        out["reserved"] = self._live(key)
        return out


class RedisLedger(Ledger):
    """Redis shared by every gateway instance (the sessions' Redis: it must not evict)."""

    def __init__(self, url: str, timeout_s: float = 0.5) -> None:
        import redis.asyncio as redis

        self._redis = redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self._reserve = self._redis.register_script(RESERVE)
        self._settle = self._redis.register_script(SETTLE)

    async def add(self, key: str, hour: str, counts: dict[str, float]) -> None:  # noqa: D102
        name = f"usage:{key}:{hour}"
        async with self._redis.pipeline(transaction=False) as pipe:
            for field, value in counts.items():
                if field.endswith(SEP + "cost_usd"):
                    pipe.hincrbyfloat(name, field, value)
                else:
                    pipe.hincrby(name, field, int(value))
            pipe.expire(name, RETENTION_S)
            await pipe.execute()

    async def hours(self, key: str, hours: list[str]) -> dict[str, dict[str, float]]:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            for h in hours:
                pipe.hgetall(f"usage:{key}:{h}")
            found = await pipe.execute()
        return {h: {k.decode(): float(v) for k, v in got.items()} for h, got in zip(hours, found, strict=True) if got}

    async def reserve(self, periods: list[Period], estimate: int, lease: str, lease_s: float) -> int:  # noqa: D102
        now_ms = int(time.time() * 1000)
        args: list[int | str] = [estimate, lease, now_ms, now_ms + int(lease_s * 1000)]
        for p in periods:
            args += [p.tokens, p.cost_micro, p.ttl_s]
        return int(await self._reserve(keys=_keys(periods), args=args))

    async def settle(self, periods: list[Period], lease: str, estimate: int, tokens: int,  # noqa: D102
                     cost_micro: int) -> None:
        member = f"{lease}:{estimate}" if lease else ""
        await self._settle(keys=_keys(periods), args=[member, tokens, cost_micro,
                                                                *[p.ttl_s for p in periods]])

    async def period(self, key: str) -> dict[str, int]:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(key)
            pipe.zrangebyscore(f"{key}:held", int(time.time() * 1000), "+inf")
            got, held = await pipe.execute()
        out = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in got.items()}
        out["reserved"] = sum(int((m.decode() if isinstance(m, bytes) else m).rsplit(":", 1)[1]) for m in held)
        return out

    async def close(self) -> None:  # noqa: D102
        await self._redis.aclose()
