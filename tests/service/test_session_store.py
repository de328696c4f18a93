"""Sessions on a Redis of their own survive the cache Redis filling past its maxmemory (real redis-servers).

Before: interviews and conversations lived on --redis-url, the cache Redis (allkeys-LRU, no
persistence): filling it with query vectors evicted an idle session, whose next answer was a 404.
"""

from __future__ import annotations

import asyncio

import redis

from gateway.config import GatewaySettings
from gateway.wiring import sessions_store
from support import RedisServer, off_loop


async def test_sessions_survive_a_full_cache_redis_on_their_own(tmp_path):
    async with off_loop(RedisServer(tmp_path / "cache")) as cache, \
            off_loop(RedisServer(tmp_path / "sessions")) as sessions:
        direct = redis.Redis.from_url(cache.url_for(0))
        direct.config_set("maxmemory", "4mb")  # as deployed, smaller: allkeys-lru
        direct.config_set("maxmemory-policy", "allkeys-lru")
        own = sessions_store(GatewaySettings(redis_url=cache.url_for(0), sessions_redis_url=sessions.url_for(0)))
        shared = sessions_store(GatewaySettings(redis_url=cache.url_for(0)))  # the old place (warned at start)
        try:
            await own.hsetnx("interview:" + "a" * 32, "meta", "{}", 7200)
            await shared.hsetnx("interview:" + "b" * 32, "meta", "{}", 7200)
            def fill() -> None:
                pipe = direct.pipeline(transaction=False)
                for i in range(5000):  # 50 MB of cached query vectors through a 4 MB cache
                    pipe.set(f"qv:{i}", b"x" * 10_000)
                    if i % 500 == 499:
                        pipe.execute()
                pipe.execute()

            await asyncio.to_thread(fill)  # the test's own filling, off the loop the gateway stores share
            assert int(direct.info("stats")["evicted_keys"]) > 0
            assert await own.hgetall("interview:" + "a" * 32) == {"meta": "{}"}
            assert await shared.hgetall("interview:" + "b" * 32) == {}  # evicted with the cache's keys
        finally:
            await own.close()
            await shared.close()
            direct.close()
