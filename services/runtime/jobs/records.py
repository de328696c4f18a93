"""Job records, the store's errors, and what a running handler may do with its job (:class:`JobContext`)."""


from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from services.runtime.jobs.base import Jobs


JOB_ID = re.compile(r"[0-9a-f]{32}")
State = Literal["queued", "running", "succeeded", "failed"]
FINISHED = ("succeeded", "failed")


class JobNotFound(KeyError):
    """No such job (unknown, malformed id, or expired)."""


class JobStoreUnavailable(RuntimeError):
    """The job store (Redis) cannot be reached."""


class JobStoreFull(JobStoreUnavailable):
    """The job store refused a write for memory (Redis at maxmemory, noeviction): the job fails, not retried."""


class QueueFull(RuntimeError):
    """Too many jobs are waiting; retry later."""


class LeaseLost(RuntimeError):
    """A write was refused: a later attempt holds the job (this one's lease lapsed and another instance took it)."""


class StoreMonitor(Protocol):
    """What a job store needs of a health monitor (``services.bootstrap.health.DependencyMonitor``)."""

    def recheck(self) -> None:
        """Probe the dependencies now."""

    async def wait_up(self, name: str) -> None:
        """Return once ``name`` is up."""


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
    attempts: int = 0  # the fence of the latest attempt: a write with an older one is refused
    cancel_requested: bool = False
    created_unix_ms: int = 0
    updated_unix_ms: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # the submitter's: ``trace`` (W3C headers), options

    def dumps(self) -> str:
        """JSON of the record."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def loads(cls, raw: str | bytes) -> JobRecord:
        """A record from its JSON."""
        return cls(**json.loads(raw))


def now_ms() -> int:
    """Wall-clock milliseconds (what records store)."""
    return int(time.time() * 1000)


class JobContext:
    """What a handler may do with its running job: report progress, note errors, stop when cancelled."""

    def __init__(self, store: Jobs, record: JobRecord) -> None:
        self.store = store
        self.record = record
        self.fence = record.attempts

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
        await self.store.save(self.record, fence=self.fence)
        if self.record.cancel_requested:
            raise Cancelled

    async def write_part(self, part: str, entries: dict[str, str | bytes]) -> None:
        """Add entries to one of this job's parts (see :meth:`Jobs.write_part`)."""
        await self.store.write_part(self.record.id, part, entries, fence=self.fence)

    async def read_part(self, part: str) -> dict[str, bytes]:
        """One of this job's parts (see :meth:`Jobs.read_part`)."""
        return await self.store.read_part(self.record.id, part)
