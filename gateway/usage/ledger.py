"""Usage per caller and quota state: hourly counters and per-period reservations, in Redis or in process.

Counters: one hash per UTC hour, ``usage:<YYYYMMDDHH>``, fields of key, route, model and metric joined by
:data:`SEP` (requests, prompt_tokens, completion_tokens, cached_prompt_tokens, cost_usd), kept ``RETENTION_S`` (90
days). Quotas: one hash per key and period, ``quota:<key>:<d|m>:<period>`` with ``used`` and ``reserved``
tokens (and ``cost_micro`` used), expiring after the period. A request is admitted by one Lua script
(Redis runs it atomically, so gateway instances never race): it is refused when a period's ``used +
reserved`` has reached the limit, else it reserves an estimate in every period; when it ends, the
reservation is released and the real tokens added. So concurrent callers overshoot a quota by at
most what their last admitted requests used beyond their estimates.
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


RESERVE = """
local est = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local tokens = tonumber(ARGV[2 * i])
  local cost = tonumber(ARGV[2 * i + 1])
  local used = tonumber(redis.call('HGET', key, 'used') or '0')
  local reserved = tonumber(redis.call('HGET', key, 'reserved') or '0')
  local spent = tonumber(redis.call('HGET', key, 'cost_micro') or '0')
  if (tokens > 0 and used + reserved >= tokens) or (cost > 0 and spent >= cost) then
    return i
  end
end
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'reserved', est)
  redis.call('EXPIRE', key, tonumber(ARGV[2 * #KEYS + 1 + i]))
end
return 0
"""
SETTLE = """
local est = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'reserved', -est)
  redis.call('HINCRBY', key, 'used', tonumber(ARGV[2]))
  redis.call('HINCRBY', key, 'cost_micro', tonumber(ARGV[3]))
end
return 0
"""


def hour_of(unix_s: float) -> str:
    """The UTC hour a moment falls in, as the counters name it."""
    return time.strftime("%Y%m%d%H", time.gmtime(unix_s))


class Ledger(ABC):
    """Usage counters and quota reservations."""

    @abstractmethod
    async def add(self, hour: str, counts: dict[str, float]) -> None:
        """Add to an hour's counters (fields as :data:`SEP`-joined key, route, model, metric)."""

    @abstractmethod
    async def hours(self, hours: list[str]) -> dict[str, dict[str, float]]:
        """The counters of each hour that has any."""

    @abstractmethod
    async def reserve(self, periods: list[Period], estimate: int) -> int:
        """0 when admitted (``estimate`` reserved in every period), else the 1-based index of the full period."""

    @abstractmethod
    async def settle(self, periods: list[Period], estimate: int, tokens: int, cost_micro: int) -> None:
        """Release a reservation and add what the request used."""

    @abstractmethod
    async def period(self, key: str) -> dict[str, int]:
        """A period's ``used``, ``reserved`` and ``cost_micro``."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class MemoryLedger(Ledger):
    """In this process (no Redis): the same rules, atomic because nothing awaits inside an update."""

    def __init__(self) -> None:
        self._hours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._periods: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    async def add(self, hour: str, counts: dict[str, float]) -> None:  # noqa: D102
        for name, value in counts.items():
            self._hours[hour][name] += value

    async def hours(self, hours: list[str]) -> dict[str, dict[str, float]]:  # noqa: D102
        return {h: dict(self._hours[h]) for h in hours if h in self._hours}

    async def reserve(self, periods: list[Period], estimate: int) -> int:  # noqa: D102
        for i, p in enumerate(periods, 1):
            state = self._periods[p.key]
            if (p.tokens and state["used"] + state["reserved"] >= p.tokens) or \
                    (p.cost_micro and state["cost_micro"] >= p.cost_micro):
                return i
        for p in periods:
            self._periods[p.key]["reserved"] += estimate
        return 0

    async def settle(self, periods: list[Period], estimate: int, tokens: int, cost_micro: int) -> None:  # noqa: D102
        for p in periods:
            state = self._periods[p.key]
            state["reserved"] -= estimate
            state["used"] += tokens
            state["cost_micro"] += cost_micro

    async def period(self, key: str) -> dict[str, int]:  # noqa: D102
        return dict(self._periods.get(key, {}))


class RedisLedger(Ledger):
    """Redis shared by every gateway instance (the sessions' Redis: it must not evict)."""

    def __init__(self, url: str, timeout_s: float = 0.5) -> None:
        import redis.asyncio as redis

        self._redis = redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self._reserve = self._redis.register_script(RESERVE)
        self._settle = self._redis.register_script(SETTLE)

    async def add(self, hour: str, counts: dict[str, float]) -> None:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            for name, value in counts.items():
                if name.endswith(SEP + "cost_usd"):
                    pipe.hincrbyfloat(f"usage:{hour}", name, value)
                else:
                    pipe.hincrby(f"usage:{hour}", name, int(value))
            pipe.expire(f"usage:{hour}", RETENTION_S)
            await pipe.execute()

    async def hours(self, hours: list[str]) -> dict[str, dict[str, float]]:  # noqa: D102
        async with self._redis.pipeline(transaction=False) as pipe:
            for h in hours:
                pipe.hgetall(f"usage:{h}")
            found = await pipe.execute()
        return {h: {k.decode(): float(v) for k, v in got.items()} for h, got in zip(hours, found, strict=True) if got}

    async def reserve(self, periods: list[Period], estimate: int) -> int:  # noqa: D102
        args: list[int] = [estimate]
        for p in periods:
            args += [p.tokens, p.cost_micro]
        args += [p.ttl_s for p in periods]
        return int(await self._reserve(keys=[p.key for p in periods], args=args))

    async def settle(self, periods: list[Period], estimate: int, tokens: int, cost_micro: int) -> None:  # noqa: D102
        await self._settle(keys=[p.key for p in periods], args=[estimate, tokens, cost_micro])

    async def period(self, key: str) -> dict[str, int]:  # noqa: D102
        got = await self._redis.hgetall(key)
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in got.items()}

    async def close(self) -> None:  # noqa: D102
        await self._redis.aclose()
