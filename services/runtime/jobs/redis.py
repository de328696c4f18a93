"""The Redis job store: the durable, shared :class:`~services.runtime.jobs.base.Jobs`.

Keys, under a prefix (``jobs:{namespace}``: ``jobs:{gateway}``, ``jobs:{ocr}``), every per-job key expiring
``ttl_s`` after the job's last change:

- ``{p}:job:{id}`` the record (JSON), ``{p}:job:{id}:input`` the work, ``{p}:job:{id}:{part}`` each
  declared part, ``{p}:job:{id}:fence`` the attempt that holds the job, ``{p}:job:{id}:cancel`` a cancel;
- ``{p}:queue`` the jobs waiting; ``{p}:running:{instance}`` the jobs one instance holds;
- ``{p}:leases`` the index of instances and their lease deadlines (a sorted set, ms).

The namespace is a hash tag, so every key of one namespace lives in one slot of a Redis Cluster, and
every script names each key it touches in ``KEYS`` (as a cluster requires); ``cluster=True`` connects
with the cluster client. The whole job system of a namespace is one slot: its load is a few commands
per job, not per document.

Leases are per instance: a heartbeat every ``lease_s / 3`` moves the instance's deadline and, in the
same script, lists the instances whose deadline passed (one Redis command whatever else the database
holds, no keyspace scan); the jobs of each lapsed instance are then moved back to the queue by a
script naming that instance's running list. Taking a job moves it to the instance's running list
atomically (``BLMOVE``) and then opens a new attempt (``INCR`` of its fence); every write of the
record or its parts is a script that checks the writer's fence first, so the writes of an attempt
that lost its lease are refused (:class:`~services.runtime.jobs.base.LeaseLost`). An attempt that the
store itself interrupts (a call past its socket timeout, Redis restarting) hands its job back to the
queue as soon as Redis answers again (the instance keeps its lease, so nobody else would take it).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from services.runtime.jobs.base import Handler, Jobs
from services.runtime.jobs.records import (
    JobNotFound,
    JobRecord,
    JobStoreFull,
    JobStoreUnavailable,
    LeaseLost,
    QueueFull,
    now_ms,
)

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
# KEYS: leases. ARGV: this instance ("" to only look), now ms, lease ms.
# Renews this instance's lease; returns the instances whose lease lapsed.
_BEAT = """
local now = tonumber(ARGV[2])
if ARGV[1] ~= '' then redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1]) end
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
"""
# KEYS: leases, queue, the lapsed instance's running list. ARGV: that instance, now ms.
# Requeues its jobs if its lease is still lapsed (it may have beaten since the look); returns how many.
_REAP = """
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) >= tonumber(ARGV[2]) then return 0 end
local moved = 0
while redis.call('LMOVE', KEYS[3], KEYS[2], 'RIGHT', 'LEFT') do moved = moved + 1 end
redis.call('ZREM', KEYS[1], ARGV[1])
return moved
"""
# KEYS: leases, queue, running. ARGV: this instance. Gives this instance's jobs back (at the queue's head).
_GIVE_UP = """
local moved = 0
while redis.call('LMOVE', KEYS[3], KEYS[2], 'RIGHT', 'LEFT') do moved = moved + 1 end
redis.call('ZREM', KEYS[1], ARGV[1])
return moved
"""
# KEYS: running, queue. ARGV: job ids. Puts those this instance still holds back at the queue's head.
_REQUEUE = """
local moved = 0
for i = 1, #ARGV do
  if redis.call('LREM', KEYS[1], 0, ARGV[i]) > 0 then
    redis.call('LPUSH', KEYS[2], ARGV[i])
    moved = moved + 1
  end
end
return moved
"""
# KEYS: record, input, queue. ARGV: json, payload, ttl, job id, max queued. 0 when the queue is full.
_PUT = """
if redis.call('LLEN', KEYS[3]) >= tonumber(ARGV[5]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[4])
return 1
"""
# KEYS: running, input. ARGV: job id. A finished job leaves this instance's list; its input goes.
_RELEASE = """
redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('DEL', KEYS[2])
return 1
"""


class RedisJobs(Jobs):
    """Jobs in Redis, shared by every instance, leased per instance and fenced per attempt (module docstring)."""

    def __init__(self, handlers: dict[str, Handler], redis_url: str, namespace: str, *, lease_s: float = 15.0,
                 timeout_s: float = 2.0, cluster: bool = False, part_ttl_s: dict[str, int] | None = None,
                 **kwargs: Any) -> None:
        import redis.asyncio as aioredis

        super().__init__(handlers, **kwargs)
        # Parts that keep a TTL of their own from their last write (large, short-lived results such as
        # masked PNGs): the record's saves do not renew them.
        self.part_ttl_s = dict(part_ttl_s or {})
        self.durable = True
        self.prefix = f"jobs:{{{namespace}}}"  # a hash tag: one cluster slot per namespace
        self.lease_s = lease_s
        self.instance = uuid.uuid4().hex[:12]
        connect: Any = aioredis.RedisCluster.from_url if cluster else aioredis.from_url
        self.redis = connect(redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        # Blocking pops get their own connection without a socket timeout shorter than the block.
        self._blocking = connect(redis_url, socket_timeout=None, socket_connect_timeout=timeout_s)
        self.queue = f"{self.prefix}:queue"
        self.leases = f"{self.prefix}:leases"
        self.running = self.running_list(self.instance)
        self._save = self.redis.register_script(_SAVE)
        self._part = self.redis.register_script(_WRITE_PART)
        self._claim_script = self.redis.register_script(_CLAIM)
        self._cancel_script = self.redis.register_script(_CANCEL)
        self._beat = self.redis.register_script(_BEAT)
        self._reap = self.redis.register_script(_REAP)
        self._give_up = self.redis.register_script(_GIVE_UP)
        self._requeue_script = self.redis.register_script(_REQUEUE)
        self._put_script = self.redis.register_script(_PUT)
        self._release_script = self.redis.register_script(_RELEASE)
        self._leased = asyncio.Event()  # set by the first beat that reached Redis

    def running_list(self, instance: str) -> str:
        """The key of the list of jobs ``instance`` holds."""
        return f"{self.prefix}:running:{instance}"

    def _key(self, job_id: str, part: str = "") -> str:
        return f"{self.prefix}:job:{job_id}" + (f":{part}" if part else "")

    async def _redis(self, op: Awaitable[Any]) -> Any:
        from redis.exceptions import OutOfMemoryError, RedisError

        try:
            return await op
        except RedisError as err:
            if isinstance(err, OutOfMemoryError):  # at maxmemory with noeviction: waiting would not free any
                raise JobStoreFull(f"job store full: {err}") from None
            raise JobStoreUnavailable(f"job store unavailable: {err}") from None

    async def drop_parts(self, job_id: str) -> None:
        """Remove a job's parts (its partial results): frees memory for the failed record (DEL needs none)."""
        await self._redis(self.redis.delete(*(self._key(job_id, part) for part in self.parts)))

    async def ping(self) -> None:
        """Return when Redis answers."""
        await self.redis.ping()

    async def _put(self, record: JobRecord, payload: bytes) -> None:
        put = self._put_script(keys=[self._key(record.id), self._key(record.id, "input"), self.queue],
                               args=[record.dumps(), payload, self.ttl_s, record.id, self.max_queued])
        if not await self._redis(put):
            raise QueueFull(f"{self.max_queued} jobs already queued")

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
        await self._redis(self._release_script(keys=[self.running, self._key(job_id, "input")], args=[job_id]))

    async def _requeue(self, job_ids: list[str] | None) -> int:
        if job_ids is None:  # strays: in this instance's list, run by none of its workers
            held = await self._redis(self.redis.lrange(self.running, 0, -1))
            job_ids = [j for j in (h.decode() if isinstance(h, bytes) else h for h in held) if j not in self._held]
        if not job_ids:
            return 0
        return int(await self._redis(self._requeue_script(keys=[self.running, self.queue], args=job_ids)))

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
                self._key(record.id, "input"),
                *(self._key(record.id, part) for part in self.parts if part not in self.part_ttl_s)]
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
                                           args=["" if fence is None else fence,
                                                 self.part_ttl_s.get(part, self.ttl_s), *pairs]))
        if got == -1:
            raise LeaseLost(f"job {job_id}: attempt {fence} no longer holds it")

    async def read_part(self, job_id: str, part: str) -> dict[str, bytes]:  # noqa: D102
        raw = await self._redis(self.redis.hgetall(self._key(job_id, part)))
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}

    async def read_entry(self, job_id: str, part: str, key: str) -> bytes | None:  # noqa: D102
        return await self._redis(self.redis.hget(self._key(job_id, part), key))

    async def used_bytes(self) -> int:
        """Memory Redis uses now (what a bound on stored uploads compares against)."""
        return int((await self._redis(self.redis.info("memory"))).get("used_memory", 0))

    async def start(self) -> None:  # noqa: D102
        self._tasks.append(asyncio.create_task(self._heartbeat()))  # beats at once, then every lease_s / 3
        await super().start()

    async def beat(self) -> int:
        """Renew this instance's lease and requeue the jobs of lapsed instances; returns how many.

        One command when no instance lapsed (the usual case), one more per lapsed instance.
        """
        lapsed = await self._redis(self._beat(keys=[self.leases], args=[self.instance, now_ms(),
                                                                         int(self.lease_s * 1000)]))
        self._leased.set()
        return await self._reap_all(lapsed)

    async def requeue_orphans(self) -> int:
        """Requeue the jobs of instances whose lease lapsed, without renewing ours; returns how many."""
        lapsed = await self._redis(self._beat(keys=[self.leases], args=["", now_ms(), int(self.lease_s * 1000)]))
        return await self._reap_all(lapsed)

    async def _reap_all(self, lapsed: list[Any]) -> int:
        moved = 0
        for raw in lapsed:
            owner = raw.decode() if isinstance(raw, bytes) else str(raw)
            moved += int(await self._redis(self._reap(keys=[self.leases, self.queue, self.running_list(owner)],
                                                      args=[owner, now_ms()])))
        if moved:
            log.warning("requeued %d %s job(s) of lapsed instances", moved, self.prefix)
        return moved

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
