"""The Redis job store: the durable, shared :class:`~services.runtime.jobs.base.Jobs`.

Keys, under a prefix (``jobs:{namespace}``: ``jobs:gateway``, ``jobs:ocr``), every per-job key expiring
``ttl_s`` after the job's last change:

- ``{p}:job:{id}`` the record (JSON), ``{p}:job:{id}:input`` the work, ``{p}:job:{id}:{part}`` each
  declared part, ``{p}:job:{id}:fence`` the attempt that holds the job, ``{p}:job:{id}:cancel`` a cancel;
- ``{p}:queue`` the jobs waiting; ``{p}:running:{instance}`` the jobs one instance holds;
- ``{p}:leases`` the index of instances and their lease deadlines (a sorted set, ms).

Leases are per instance: a heartbeat every ``lease_s / 3`` moves the instance's deadline and, in the
same script, takes the jobs of every instance whose deadline passed back to the queue. A cycle is
one Redis command whatever else the database holds (no keyspace scan). Taking a job moves it to the
instance's running list atomically (``BLMOVE``) and then opens a new attempt (``INCR`` of its fence);
every write of the record or its parts is a script that checks the writer's fence first, so the
writes of an attempt that lost its lease are refused (:class:`~services.runtime.jobs.base.LeaseLost`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from services.runtime.jobs.base import Handler, Jobs
from services.runtime.jobs.records import JobNotFound, JobRecord, JobStoreUnavailable, LeaseLost, QueueFull, now_ms

log = logging.getLogger(__name__)

# KEYS: record, fence, cancel, then every key that expires with the record. ARGV: fence ("" unfenced), json, ttl.
# Returns -1 when another attempt holds the job, else whether a cancel is stored.
_SAVE = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
for i = 2, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
return redis.call('EXISTS', KEYS[3])
"""
# KEYS: part, fence. ARGV: fence ("" unfenced), ttl, then field, value pairs. Returns -1 when refused.
_WRITE_PART = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
# KEYS: fence. ARGV: ttl. The new attempt's fence.
_CLAIM = """
local fence = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return fence
"""
# KEYS: cancel, queue. ARGV: job id, ttl. 1 when the job was still queued (now off the queue).
_CANCEL = """
redis.call('SET', KEYS[1], '1', 'EX', ARGV[2])
return redis.call('LREM', KEYS[2], 0, ARGV[1])
"""
# KEYS: leases, queue. ARGV: prefix, this instance ("" to only reap), now ms, lease ms.
# Renews this instance's lease and requeues the jobs of every lapsed instance; returns how many moved.
_BEAT = """
local now = tonumber(ARGV[3])
if ARGV[2] ~= '' then redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[2]) end
local moved = 0
for _, owner in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)) do
  local running = ARGV[1] .. ':running:' .. owner
  while redis.call('LMOVE', running, KEYS[2], 'RIGHT', 'LEFT') do moved = moved + 1 end
  redis.call('ZREM', KEYS[1], owner)
end
return moved
"""
# KEYS: leases, queue, running. ARGV: this instance. Gives this instance's jobs back (at the queue's head).
_GIVE_UP = """
local moved = 0
while redis.call('LMOVE', KEYS[3], KEYS[2], 'RIGHT', 'LEFT') do moved = moved + 1 end
redis.call('ZREM', KEYS[1], ARGV[1])
return moved
"""


class RedisJobs(Jobs):
    """Jobs in Redis, shared by every instance, leased per instance and fenced per attempt (module docstring)."""

    def __init__(self, handlers: dict[str, Handler], redis_url: str, namespace: str, *, lease_s: float = 15.0,
                 timeout_s: float = 2.0, **kwargs: Any) -> None:
        import redis.asyncio as aioredis

        super().__init__(handlers, **kwargs)
        self.durable = True
        self.prefix = f"jobs:{namespace}"
        self.lease_s = lease_s
        self.instance = uuid.uuid4().hex[:12]
        self.redis = aioredis.from_url(redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        # Blocking pops get their own connection without a socket timeout shorter than the block.
        self._blocking = aioredis.from_url(redis_url, socket_timeout=None, socket_connect_timeout=timeout_s)
        self.queue = f"{self.prefix}:queue"
        self.leases = f"{self.prefix}:leases"
        self.running = self.running_list(self.instance)
        self._save = self.redis.register_script(_SAVE)
        self._part = self.redis.register_script(_WRITE_PART)
        self._claim_script = self.redis.register_script(_CLAIM)
        self._cancel_script = self.redis.register_script(_CANCEL)
        self._beat = self.redis.register_script(_BEAT)
        self._give_up = self.redis.register_script(_GIVE_UP)
        self._leased = asyncio.Event()  # set by the first beat that reached Redis

    def running_list(self, instance: str) -> str:
        """The key of the list of jobs ``instance`` holds."""
        return f"{self.prefix}:running:{instance}"

    def _key(self, job_id: str, part: str = "") -> str:
        return f"{self.prefix}:job:{job_id}" + (f":{part}" if part else "")

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
        if not self._leased.is_set():  # no job is taken before this instance's lease is in the index
            try:
                await asyncio.wait_for(self._leased.wait(), 1.0)
            except TimeoutError:
                return None
        raw = await self._redis(self._blocking.blmove(self.queue, self.running, 1, "LEFT", "RIGHT"))
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else raw)

    async def _claim(self, job_id: str) -> int:
        return int(await self._redis(self._claim_script(keys=[self._key(job_id, "fence")], args=[self.ttl_s])))

    async def _cancel(self, job_id: str) -> bool:
        return bool(await self._redis(self._cancel_script(keys=[self._key(job_id, "cancel"), self.queue],
                                                          args=[job_id, self.ttl_s])))

    async def _release(self, job_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.lrem(self.running, 1, job_id)
            pipe.delete(self._key(job_id, "input"))
            await self._redis(pipe.execute())

    async def get(self, job_id: str) -> JobRecord:  # noqa: D102
        self.check_id(job_id)
        raw, cancel = await self._redis(self.redis.mget(self._key(job_id), self._key(job_id, "cancel")))
        if raw is None:
            raise JobNotFound(job_id)
        record = JobRecord.loads(raw)
        record.cancel_requested = record.cancel_requested or cancel is not None
        return record

    async def save(self, record: JobRecord, *, fence: int | None = None) -> None:  # noqa: D102
        record.updated_unix_ms = now_ms()
        keys = [self._key(record.id), self._key(record.id, "fence"), self._key(record.id, "cancel"),
                self._key(record.id, "input"), *(self._key(record.id, part) for part in self.parts)]
        got = await self._redis(self._save(keys=keys, args=["" if fence is None else fence, record.dumps(),
                                                            self.ttl_s]))
        if got == -1:
            raise LeaseLost(f"job {record.id}: attempt {fence} no longer holds it")
        record.cancel_requested = record.cancel_requested or bool(got)

    async def payload(self, job_id: str) -> bytes:  # noqa: D102
        return await self._redis(self.redis.get(self._key(job_id, "input"))) or b""

    async def _write_part(self, job_id: str, part: str, entries: dict[str, str | bytes], fence: int | None) -> None:
        pairs = [x for k, v in entries.items() for x in (k, v)]
        got = await self._redis(self._part(keys=[self._key(job_id, part), self._key(job_id, "fence")],
                                           args=["" if fence is None else fence, self.ttl_s, *pairs]))
        if got == -1:
            raise LeaseLost(f"job {job_id}: attempt {fence} no longer holds it")

    async def read_part(self, job_id: str, part: str) -> dict[str, bytes]:  # noqa: D102
        raw = await self._redis(self.redis.hgetall(self._key(job_id, part)))
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}

    async def used_bytes(self) -> int:
        """Memory Redis uses now (what a bound on stored uploads compares against)."""
        return int((await self._redis(self.redis.info("memory"))).get("used_memory", 0))

    async def start(self) -> None:  # noqa: D102
        self._tasks.append(asyncio.create_task(self._heartbeat()))  # beats at once, then every lease_s / 3
        await super().start()

    async def beat(self) -> int:
        """Renew this instance's lease and requeue the jobs of lapsed instances (one command); returns how many."""
        moved = int(await self._redis(self._beat(keys=[self.leases, self.queue],
                                                 args=[self.prefix, self.instance, now_ms(),
                                                       int(self.lease_s * 1000)])))
        self._leased.set()
        if moved:
            log.warning("requeued %d %s job(s) of lapsed instances", moved, self.prefix)
        return moved

    async def requeue_orphans(self) -> int:
        """Requeue the jobs of instances whose lease lapsed, without renewing ours; returns how many."""
        return int(await self._redis(self._beat(keys=[self.leases, self.queue],
                                                args=[self.prefix, "", now_ms(), int(self.lease_s * 1000)])))

    async def _heartbeat(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.beat()
            except JobStoreUnavailable as err:  # the health monitor reports Redis down once
                log.debug("heartbeat failed: %s", err)
            try:
                await asyncio.wait_for(self._stopping.wait(), self.lease_s / 3)
            except TimeoutError:
                pass

    async def close(self) -> None:
        """Stop workers and give this instance's jobs back at once, so another instance resumes them now."""
        await super().close()
        try:
            await self._give_up(keys=[self.leases, self.queue, self.running], args=[self.instance])
        except Exception:  # noqa: BLE001 - best effort; the lease lapses anyway
            pass
        await self.redis.aclose()
        await self._blocking.aclose()
