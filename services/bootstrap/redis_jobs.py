"""The Redis job store: the durable, shared :class:`~services.bootstrap.jobs.Jobs`.

Keys, leases and the heartbeat are described in :mod:`services.bootstrap.jobs`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from services.bootstrap.jobs import Handler, JobNotFound, JobRecord, Jobs, JobStoreUnavailable, QueueFull, _now_ms

log = logging.getLogger(__name__)


class RedisJobs(Jobs):
    """Jobs in Redis, shared by every instance, leased by heartbeats (see the module docstring)."""

    def __init__(self, handlers: dict[str, Handler], redis_url: str, namespace: str, *, lease_s: float = 15.0,
                 timeout_s: float = 2.0, **kwargs: Any) -> None:
        import redis.asyncio as aioredis

        super().__init__(handlers, **kwargs)
        self.durable = True
        self.ns = namespace
        self.lease_s = lease_s
        self.instance = uuid.uuid4().hex[:12]
        self.redis = aioredis.from_url(redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        # Blocking pops get their own connection without a socket timeout shorter than the block.
        self._blocking = aioredis.from_url(redis_url, socket_timeout=None, socket_connect_timeout=timeout_s)
        self.queue = f"{namespace}:queue"
        self.running = f"{namespace}:running:{self.instance}"

    def _key(self, job_id: str, part: str = "") -> str:
        return f"{self.ns}:job:{job_id}" + (f":{part}" if part else "")

    async def _redis(self, op: Awaitable[Any]) -> Any:
        from redis.exceptions import RedisError

        try:
            return await op
        except RedisError as err:
            raise JobStoreUnavailable(f"job store unavailable: {err}") from None

    async def ping(self) -> None:
        """Return when Redis answers."""
        await self.redis.ping()

    async def _put(self, record: JobRecord, payload: bytes) -> None:
        if await self._redis(self.redis.llen(self.queue)) >= self.max_queued:
            raise QueueFull(f"{self.max_queued} jobs already queued")
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(record.id), record.dumps(), ex=self.ttl_s)
            pipe.set(self._key(record.id, "input"), payload, ex=self.ttl_s)
            pipe.rpush(self.queue, record.id)
            await self._redis(pipe.execute())

    async def _take(self) -> str | None:
        raw = await self._redis(self._blocking.blmove(self.queue, self.running, 1, "LEFT", "RIGHT"))
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else raw)

    async def _release(self, job_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.lrem(self.running, 1, job_id)
            pipe.delete(self._key(job_id, "input"))
            await self._redis(pipe.execute())

    async def get(self, job_id: str) -> JobRecord:  # noqa: D102
        self.check_id(job_id)
        raw = await self._redis(self.redis.get(self._key(job_id)))
        if raw is None:
            raise JobNotFound(job_id)
        return JobRecord.loads(raw)

    async def save(self, record: JobRecord) -> None:
        """Store a record and refresh its TTL; a cancel already stored is kept (WATCH/MULTI, retried)."""
        from redis.exceptions import WatchError

        record.updated_unix_ms = _now_ms()
        key = self._key(record.id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await self._redis(pipe.watch(key))
                    old = await self._redis(pipe.get(key))
                    record.cancel_requested = record.cancel_requested or (
                        old is not None and JobRecord.loads(old).cancel_requested)
                    pipe.multi()
                    pipe.set(key, record.dumps(), ex=self.ttl_s)
                    for part in ("input", *self.parts):
                        pipe.expire(self._key(record.id, part), self.ttl_s)
                    await self._redis(pipe.execute())
                    return
                except WatchError:
                    continue  # someone (a cancel) wrote in between: merge again

    async def payload(self, job_id: str) -> bytes:  # noqa: D102
        return await self._redis(self.redis.get(self._key(job_id, "input"))) or b""

    async def _write_part(self, job_id: str, part: str, entries: dict[str, str | bytes]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._key(job_id, part), mapping=entries)  # type: ignore[arg-type]
            pipe.expire(self._key(job_id, part), self.ttl_s)
            await self._redis(pipe.execute())

    async def read_part(self, job_id: str, part: str) -> dict[str, bytes]:  # noqa: D102
        raw = await self._redis(self.redis.hgetall(self._key(job_id, part)))
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}

    async def used_bytes(self) -> int:
        """Memory Redis uses now (what a bound on stored uploads compares against)."""
        return int((await self._redis(self.redis.info("memory"))).get("used_memory", 0))

    async def start(self) -> None:  # noqa: D102
        self._tasks.append(asyncio.create_task(self._heartbeat()))
        await super().start()

    async def _heartbeat(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._redis(self.redis.set(f"{self.ns}:instance:{self.instance}", "1",
                                                 px=int(self.lease_s * 1000)))
                await self._redis(self.requeue_orphans())
            except JobStoreUnavailable as err:  # the health monitor reports Redis down once
                log.debug("heartbeat failed: %s", err)
            try:
                await asyncio.wait_for(self._stopping.wait(), self.lease_s / 3)
            except TimeoutError:
                pass

    async def requeue_orphans(self) -> int:
        """Put jobs held by instances whose lease lapsed back on the queue; returns how many."""
        moved = 0
        async for key in self.redis.scan_iter(match=f"{self.ns}:running:*"):
            owner = (key.decode() if isinstance(key, bytes) else key).rsplit(":", 1)[-1]
            if owner == self.instance or await self.redis.exists(f"{self.ns}:instance:{owner}"):
                continue
            while await self.redis.lmove(key, self.queue, "RIGHT", "LEFT") is not None:
                moved += 1
        if moved:
            log.warning("requeued %d %s job(s) of lapsed instances", moved, self.ns)
        return moved

    async def close(self) -> None:
        """Stop workers and give up the lease at once, so another instance resumes our jobs now."""
        await super().close()
        try:
            await self.redis.delete(f"{self.ns}:instance:{self.instance}")
        except Exception:  # noqa: BLE001 - best effort; the lease lapses anyway
            pass
        await self.redis.aclose()
        await self._blocking.aclose()
