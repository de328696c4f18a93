"""The in-process key-value store (no Redis): a bound per kind of key, least recently used first."""

from __future__ import annotations

from gateway.tasks.store import MemoryKeyValue


async def test_a_full_kind_evicts_its_least_recently_used_key_and_no_other_kinds():
    store = MemoryKeyValue(max_keys=2)
    await store.hset("interview:a", "meta", "{}", 7200)
    await store.hset("interview:b", "meta", "{}", 7200)
    for i in range(5):  # day-long task-cache entries fill their own kind, not the interviews'
        await store.set(f"task:{i}", "cached", 86400)
    assert await store.hgetall("interview:a") == {"meta": "{}"}  # used now: b is the least recent
    await store.hset("interview:c", "meta", "{}", 7200)
    assert await store.hgetall("interview:b") == {}
    assert await store.hgetall("interview:a") and await store.hgetall("interview:c")
    assert [await store.get(f"task:{i}") for i in range(5)] == [None, None, None, "cached", "cached"]


async def test_an_expired_key_goes_before_a_live_one():
    now = [1000.0]
    store = MemoryKeyValue(max_keys=2, clock=lambda: now[0])
    await store.hset("conversation:old", "meta", "{}", 10)
    await store.hset("conversation:live", "meta", "{}", 1000)
    await store.hgetall("conversation:old")  # the most recently used, but expired below
    now[0] += 60
    await store.hset("conversation:new", "meta", "{}", 1000)
    assert await store.hgetall("conversation:live") and await store.hgetall("conversation:new")
    assert await store.ttl("conversation:old") == 0


async def test_a_field_moves_once_and_never_over_another():
    store = MemoryKeyValue()
    assert await store.hmove("conversation:a", "confirmed", "reopened:1", 60) is None  # nothing to move
    await store.hset("conversation:a", "confirmed", "v1", 60)
    assert await store.hmove("conversation:a", "confirmed", "reopened:1", 60) is True
    assert await store.hgetall("conversation:a") == {"reopened:1": "v1"}
    await store.hset("conversation:a", "confirmed", "v2", 60)
    assert await store.hmove("conversation:a", "confirmed", "reopened:1", 60) is False  # taken: nothing changes
    assert await store.hgetall("conversation:a") == {"reopened:1": "v1", "confirmed": "v2"}
