"""One process's jobs (no Redis configured): the :class:`~services.runtime.jobs.base.Jobs` interface in memory.

Nothing survives a restart here, and the records say so (``durable`` is false). Fences are kept as
in Redis, so a handler behaves the same on both stores.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.runtime.jobs.base import Handler, Jobs
from services.runtime.jobs.records import JobNotFound, JobRecord, LeaseLost, QueueFull, now_ms


class MemoryJobs(Jobs):
    """One process's jobs: same interface as the Redis store, nothing survives a restart."""

    def __init__(self, handlers: dict[str, Handler], **kwargs: Any) -> None:
        super().__init__(handlers, **kwargs)
        self._records: dict[str, str] = {}
        self._payloads: dict[str, bytes] = {}
        self._parts: dict[str, dict[str, dict[str, bytes]]] = {}  # job id -> part -> entries
        self._fences: dict[str, int] = {}
        self._cancelled: set[str] = set()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()

    async def _put(self, record: JobRecord, payload: bytes) -> None:
        if len(self._queued) >= self.max_queued:
            raise QueueFull(f"{self.max_queued} jobs already queued")
        self._records[record.id] = record.dumps()
        self._payloads[record.id] = payload
        self._queued.add(record.id)
        self._queue.put_nowait(record.id)

    async def _take(self) -> str | None:
        while True:
            job_id = await self._queue.get()
            if job_id in self._queued:  # a cancel took it off the queue meanwhile
                self._queued.discard(job_id)
                return job_id

    async def _claim(self, job_id: str) -> int:
        self._queued.discard(job_id)
        self._fences[job_id] = self._fences.get(job_id, 0) + 1
        return self._fences[job_id]

    async def _cancel(self, job_id: str) -> bool:
        self._cancelled.add(job_id)
        if job_id in self._queued:
            self._queued.discard(job_id)
            return True
        return False

    async def _release(self, job_id: str) -> None:
        self._payloads.pop(job_id, None)
        # Finished records are kept for the TTL, then forgotten (a long-running process stays bounded).
        cutoff = now_ms() - self.ttl_s * 1000
        for old in [k for k, v in self._records.items() if JobRecord.loads(v).updated_unix_ms < cutoff]:
            del self._records[old]
            self._parts.pop(old, None)
            self._fences.pop(old, None)
            self._cancelled.discard(old)

    async def _requeue(self, job_ids: list[str] | None) -> int:
        # Nothing is lost between this process and its memory: only an explicit hand-back requeues.
        for job_id in job_ids or []:
            self._queued.add(job_id)
            self._queue.put_nowait(job_id)
        return len(job_ids or [])

    def _check_fence(self, job_id: str, fence: int | None) -> None:
        if fence is not None and self._fences.get(job_id, 0) != fence:
            raise LeaseLost(f"job {job_id}: attempt {fence} no longer holds it")

    async def get(self, job_id: str) -> JobRecord:  # noqa: D102
        self.check_id(job_id)
        if job_id not in self._records:
            raise JobNotFound(job_id)
        record = JobRecord.loads(self._records[job_id])
        record.cancel_requested = record.cancel_requested or job_id in self._cancelled
        return record

    async def save(self, record: JobRecord, *, fence: int | None = None) -> None:  # noqa: D102
        self._check_fence(record.id, fence)
        record.updated_unix_ms = now_ms()
        record.cancel_requested = record.cancel_requested or record.id in self._cancelled
        self._records[record.id] = record.dumps()

    async def payload(self, job_id: str) -> bytes:  # noqa: D102
        return self._payloads.get(job_id, b"")

    async def _write_part(self, job_id: str, part: str, entries: dict[str, str | bytes], fence: int | None) -> None:
        self._check_fence(job_id, fence)
        stored = self._parts.setdefault(job_id, {}).setdefault(part, {})
        stored.update({k: v.encode() if isinstance(v, str) else v for k, v in entries.items()})

    async def read_part(self, job_id: str, part: str) -> dict[str, bytes]:  # noqa: D102
        return dict(self._parts.get(job_id, {}).get(part, {}))
