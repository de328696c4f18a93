"""Durable background jobs: typed records, a queue, leases, progress, cancel and TTL, in Redis.

Any instance can submit, read and cancel any job; each instance's workers take jobs from the queue
and hold them under a lease (a heartbeat key). When an instance dies its heartbeat lapses and any
other instance's reaper puts its jobs back on the queue, so a job survives the process that ran it.
Handlers record progress as they go (and a resume point), so a resumed job continues, not restarts.

Keys, under a namespace (``gateway``, ``ocr``), each expiring ``ttl_s`` after the job's last change:
``{ns}:job:{id}`` (the record), ``{ns}:job:{id}:input`` (the work), ``{ns}:queue``,
``{ns}:running:{instance}``, ``{ns}:instance:{instance}`` (the lease).

:class:`MemoryJobs` keeps the same interface in one process (the embedded default without Redis):
nothing survives a restart there, and it says so in its records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

log = logging.getLogger(__name__)
JOB_ID = re.compile(r"[0-9a-f]{32}")
State = Literal["queued", "running", "succeeded", "failed"]
FINISHED = ("succeeded", "failed")


class JobNotFound(KeyError):
    """No such job (unknown, malformed id, or expired)."""


class JobStoreUnavailable(RuntimeError):
    """The job store (Redis) cannot be reached."""


class QueueFull(RuntimeError):
    """Too many jobs are waiting; retry later."""


class Cancelled(Exception):
    """Raised inside a handler (by :meth:`JobContext.checkpoint`) when its job was cancelled."""


@dataclass
class JobRecord:
    """A job as every instance sees it."""

    id: str
    kind: str
    subject: str
    state: State = "queued"
    done: int = 0
    total: int = 0
    failed_batches: int = 0
    errors: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    resume: int = 0  # the handler's own resume point (e.g. the next batch to send)
    attempts: int = 0
    cancel_requested: bool = False
    created_unix_ms: int = 0
    updated_unix_ms: int = 0

    def dumps(self) -> str:
        """JSON of the record."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def loads(cls, raw: str | bytes) -> JobRecord:
        """A record from its JSON."""
        return cls(**json.loads(raw))


def _now_ms() -> int:
    return int(time.time() * 1000)


class JobContext:
    """What a handler may do with its running job: report progress, note errors, stop when cancelled."""

    def __init__(self, store: Jobs, record: JobRecord) -> None:
        self.store = store
        self.record = record

    async def progress(self, *, done: int | None = None, total: int | None = None, resume: int | None = None,
                       error: str | None = None, failed_batch: bool = False) -> None:
        """Record progress (and a resume point); raises :class:`Cancelled` if the job was cancelled."""
        r = self.record
        r.done = r.done if done is None else done
        r.total = r.total if total is None else total
        r.resume = r.resume if resume is None else resume
        if error:
            r.errors.append(error)
        r.failed_batches += int(failed_batch)
        await self.checkpoint()

    async def checkpoint(self) -> None:
        """Save the record; raise :class:`Cancelled` when a cancel was asked for meanwhile.

        Saves never clear a cancel (the stores merge the flag atomically), so one that lands at any
        moment is seen here or at the next checkpoint.
        """
        await self.store.save(self.record)
        if self.record.cancel_requested:
            raise Cancelled


Handler = Callable[[JobRecord, bytes, JobContext], Awaitable[dict[str, Any] | None]]


class Jobs(ABC):
    """Submit, read, cancel; run handlers by kind on this instance's workers."""

    def __init__(self, handlers: dict[str, Handler], *, ttl_s: int = 7 * 86400, max_queued: int = 100,
                 workers: int = 1) -> None:
        self.handlers = handlers
        self.ttl_s = ttl_s
        self.max_queued = max_queued
        self.workers = workers
        self.durable = False
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    # -- storage (per backend) -------------------------------------------------------------------
    @abstractmethod
    async def _put(self, record: JobRecord, payload: bytes) -> None: ...

    @abstractmethod
    async def _take(self) -> str | None: ...

    @abstractmethod
    async def _release(self, job_id: str) -> None: ...

    @abstractmethod
    async def get(self, job_id: str) -> JobRecord:
        """A job's record; :class:`JobNotFound` when unknown or expired."""

    @abstractmethod
    async def save(self, record: JobRecord) -> None:
        """Store a record (and refresh its TTL)."""

    @abstractmethod
    async def payload(self, job_id: str) -> bytes:
        """A job's input."""

    async def start(self) -> None:
        """Start this instance's workers (and lease keeping, where there is one)."""
        self._tasks += [asyncio.create_task(self._work_loop()) for _ in range(self.workers)]

    async def close(self) -> None:
        """Stop workers; a job in progress stays leased and is taken up again (by any instance)."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- the interface ---------------------------------------------------------------------------
    async def submit(self, kind: str, subject: str, payload: bytes, total: int = 0) -> JobRecord:
        """Queue a job; :class:`QueueFull` when too many wait already."""
        if kind not in self.handlers:
            raise ValueError(f"no handler for {kind!r}")
        now = _now_ms()
        record = JobRecord(id=uuid.uuid4().hex, kind=kind, subject=subject, total=total, created_unix_ms=now,
                           updated_unix_ms=now)
        await self._put(record, payload)
        return record

    async def cancel(self, job_id: str) -> JobRecord:
        """Ask a job to stop: a queued one ends at once, a running one at its next checkpoint."""
        record = await self.get(job_id)
        if record.state in FINISHED:
            return record
        record.cancel_requested = True
        if record.state == "queued":
            record.state, record.errors = "failed", [*record.errors, "cancelled before it started"]
        await self.save(record)
        return record

    @staticmethod
    def check_id(job_id: str) -> None:
        """Ids are uuid4 hex: anything else is refused before it becomes part of a key."""
        if not JOB_ID.fullmatch(job_id):
            raise JobNotFound(job_id)

    # -- running ---------------------------------------------------------------------------------
    async def _work_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                job_id = await self._take()
            except JobStoreUnavailable as err:
                log.debug("job queue unavailable: %s", err)
                await asyncio.sleep(1.0)
                continue
            if job_id is None:
                continue
            try:
                await self.run(job_id)
                await self._release(job_id)
            except JobStoreUnavailable as err:  # stays leased: requeued when the lease lapses
                log.warning("job %s interrupted by the job store: %s", job_id, err)
                await asyncio.sleep(1.0)

    async def run(self, job_id: str) -> None:
        """Run one job to its end (succeeded, failed with its reason, or cancelled)."""
        try:
            record = await self.get(job_id)
        except JobNotFound:
            return  # expired before a worker got to it
        if record.state in FINISHED:
            return
        record.state, record.attempts = "running", record.attempts + 1
        await self.save(record)
        ctx = JobContext(self, record)
        try:
            result = await self.handlers[record.kind](record, await self.payload(job_id), ctx)
            record.result = result
            record.state = "failed" if record.failed_batches or record.errors else "succeeded"
        except Cancelled:
            record.state, record.errors = "failed", [*record.errors, "cancelled"]
            record.cancel_requested = True  # this copy predates the cancel: say it, or the save would undo it
        except (asyncio.CancelledError, JobStoreUnavailable):
            raise  # this instance is stopping (or lost Redis): the job stays leased and resumes elsewhere
        except Exception as exc:  # noqa: BLE001 - a job always ends, with its reason; the traceback is logged
            log.exception("%s job %s failed unexpectedly", record.kind, record.id)
            record.state, record.errors = "failed", [*record.errors, f"internal: {type(exc).__name__}: {exc}"]
        await self.save(record)


class MemoryJobs(Jobs):
    """One process's jobs (no Redis configured): same interface, nothing survives a restart."""

    def __init__(self, handlers: dict[str, Handler], **kwargs: Any) -> None:
        super().__init__(handlers, **kwargs)
        self._records: dict[str, str] = {}
        self._payloads: dict[str, bytes] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()

    async def _put(self, record: JobRecord, payload: bytes) -> None:
        if self._queue.qsize() >= self.max_queued:
            raise QueueFull(f"{self.max_queued} jobs already queued")
        self._records[record.id] = record.dumps()
        self._payloads[record.id] = payload
        self._queue.put_nowait(record.id)

    async def _take(self) -> str | None:
        return await self._queue.get()

    async def _release(self, job_id: str) -> None:
        self._payloads.pop(job_id, None)
        # Finished records are kept for the TTL, then forgotten (a long-running process stays bounded).
        cutoff = _now_ms() - self.ttl_s * 1000
        for old in [k for k, v in self._records.items() if JobRecord.loads(v).updated_unix_ms < cutoff]:
            del self._records[old]

    async def get(self, job_id: str) -> JobRecord:  # noqa: D102
        self.check_id(job_id)
        if job_id not in self._records:
            raise JobNotFound(job_id)
        return JobRecord.loads(self._records[job_id])

    async def save(self, record: JobRecord) -> None:  # noqa: D102
        record.updated_unix_ms = _now_ms()
        old = self._records.get(record.id)
        record.cancel_requested = record.cancel_requested or (old is not None and JobRecord.loads(old).cancel_requested)
        self._records[record.id] = record.dumps()

    async def payload(self, job_id: str) -> bytes:  # noqa: D102
        return self._payloads.get(job_id, b"")


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
                    pipe.expire(self._key(record.id, "input"), self.ttl_s)
                    await self._redis(pipe.execute())
                    return
                except WatchError:
                    continue  # someone (a cancel) wrote in between: merge again

    async def payload(self, job_id: str) -> bytes:  # noqa: D102
        return await self._redis(self.redis.get(self._key(job_id, "input"))) or b""

    async def start(self) -> None:  # noqa: D102
        self._tasks.append(asyncio.create_task(self._heartbeat()))
        await super().start()

    async def _heartbeat(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._redis(self.redis.set(f"{self.ns}:instance:{self.instance}", "1",
                                                 px=int(self.lease_s * 1000)))
                await self.requeue_orphans()
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
