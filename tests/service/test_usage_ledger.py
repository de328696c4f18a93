"""The usage ledger on a real Redis and in process: reservations under leases, expiry on every write, counters
read per key (issue 76).

Each test runs on both ledgers (the same rules; the Redis one runs them as Lua scripts), against
a real redis-server.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis.asyncio as aioredis

from gateway.usage.ledger import SEP, MemoryLedger, Period, RedisLedger

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def ledger(request, redis_url):
    if request.param == "memory":
        return MemoryLedger()
    return RedisLedger(redis_url)


def period(tokens: int = 100, ttl_s: int = 3600) -> Period:
    return Period(f"quota:k-{uuid.uuid4().hex[:8]}:d:20261207", tokens, 0, ttl_s)


async def test_a_lease_holds_room_until_settled_and_a_settle_keeps_the_expiry(ledger, redis_url):
    p = period(tokens=100)
    assert await ledger.reserve([p], 60, "a", 60) == 0
    assert (await ledger.period(p.key))["reserved"] == 60
    assert await ledger.reserve([p], 60, "b", 60) == 0  # 0 used + 60 held < 100: admitted
    assert await ledger.reserve([p], 60, "c", 60) == 1  # 0 + 120 held >= 100: refused
    await ledger.settle([p], "a", 60, 30, 0)
    await ledger.settle([p], "b", 60, 30, 0)
    state = await ledger.period(p.key)
    assert state["used"] == 60 and state["reserved"] == 0
    if isinstance(ledger, RedisLedger):
        r = aioredis.from_url(redis_url)
        try:
            await r.delete(p.key)  # the period rolled over while a request ran: its settle recreates the hash
            await ledger.settle([p], "", 0, 5, 0)
            assert 0 < await r.ttl(p.key) <= p.ttl_s  # with an expiry (it used to be left without one)
        finally:
            await r.aclose()


async def test_a_dead_instances_reservation_ends_with_its_lease(redis_url):
    clock = Clock()
    memory = MemoryLedger(clock=clock)
    p = period(tokens=100)
    assert await memory.reserve([p], 100, "killed", 30) == 0  # a gateway reserved, then was killed
    assert await memory.reserve([p], 10, "next", 30) == 1
    clock.now += 31
    assert await memory.reserve([p], 10, "next", 30) == 0  # the lease ended: the room is back

    redis_ledger = RedisLedger(redis_url)
    q = period(tokens=100)
    try:
        assert await redis_ledger.reserve([q], 100, "killed", 0.3) == 0
        assert await redis_ledger.reserve([q], 10, "next", 30) == 1
        await asyncio.sleep(0.4)
        assert await redis_ledger.reserve([q], 10, "next", 30) == 0
        assert (await redis_ledger.period(q.key))["reserved"] == 10
    finally:
        await redis_ledger.close()


async def test_counters_are_read_per_key(ledger):
    hour = "2026120703"
    a, b = f"k-a{uuid.uuid4().hex[:6]}", f"k-b{uuid.uuid4().hex[:6]}"
    await ledger.add(a, hour, {SEP.join(("/v1/chat", "m", "prompt_tokens")): 7})
    await ledger.add(b, hour, {SEP.join(("/v1/chat", "m", "prompt_tokens")): 5})
    assert await ledger.hours(a, [hour]) == {hour: {SEP.join(("/v1/chat", "m", "prompt_tokens")): 7.0}}
    assert await ledger.hours(b, [hour, "2026120704"]) == {hour: {SEP.join(("/v1/chat", "m", "prompt_tokens")): 5.0}}
