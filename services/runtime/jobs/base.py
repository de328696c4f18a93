"""Durable background jobs: typed records, a queue, leases, fencing, progress, cancel and TTL.

Any instance can submit, read and cancel any job; each instance's workers take jobs from the queue
and hold them under their instance's lease. Every time a job is taken it gets a new *fence* (its
attempt number): the record, its parts and its progress can only be written with the fence of the
attempt that holds it, so a runner that stalled past its lease, while another instance took the job
over, has every later write refused (:class:`LeaseLost`) instead of overwriting the new attempt's.
Handlers record progress as they go (and a resume point), so a resumed job continues, not restarts.
A job may keep named *parts* beside its record (hashes of partial results, e.g. OCR pages read), which
expire with it. The submitter's W3C trace context travels in the record's ``meta``: a job runs in its
own trace, its ``{kind}.job`` span linked to the request that submitted it.

Stores: :class:`~services.runtime.jobs.memory.MemoryJobs` (one process, nothing survives a restart:
the embedded default without Redis) and :class:`~services.runtime.jobs.redis.RedisJobs` (shared and
durable; its module lists the keys).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from opentelemetry import context, propagate, trace

from services.runtime.jobs.records import (
    FINISHED,
    JOB_ID,
    Cancelled,
    JobContext,
    JobNotFound,
    JobRecord,
    JobStoreFull,
    JobStoreUnavailable,
    LeaseLost,
    StoreMonitor,
    now_ms,
)

log = logging.getLogger(__name__)
Handler = Callable[[JobRecord, bytes, JobContext], Awaitable[dict[str, Any] | None]]


class Jobs(ABC):
    """Submit, read, cancel; run handlers by kind on this instance's workers.

    ``parts`` names the per-job hashes handlers may keep beside the record (they expire with it);
    ``tracer_provider`` traces job runs (the process's provider when not given).
    """

    def __init__(self, handlers: dict[str, Handler], *, ttl_s: int = 7 * 86400, max_queued: int = 100,
                 workers: int = 1, parts: tuple[str, ...] = (),
                 tracer_provider: trace.TracerProvider | None = None) -> None:
        self.handlers = handlers
        self.ttl_s = ttl_s
        self.max_queued = max_queued
        self.workers = workers
        self.parts = parts
        self.durable = False
        self.tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._monitor: StoreMonitor | None = None
        self._dependency = ""
        self._held: set[str] = set()  # the jobs this instance's workers are running now

    # -- storage (per backend) -------------------------------------------------------------------
    @abstractmethod
    async def _put(self, record: JobRecord, payload: bytes) -> None: ...

    @abstractmethod
    async def _take(self) -> str | None: ...

    @abstractmethod
    async def _claim(self, job_id: str) -> int:
        """Start a new attempt at a job this instance took: its new fence (1, 2, ...)."""

    @abstractmethod
    async def _release(self, job_id: str) -> None: ...

    @abstractmethod
    async def _requeue(self, job_ids: list[str] | None) -> int:
        """Put jobs this instance holds back at the head of the queue; how many moved.

        ``None``: every one it holds that no worker of this instance runs (a take whose answer was lost).
        """

    @abstractmethod
    async def _cancel(self, job_id: str) -> bool:
        """Flag a job cancelled; True when it was still queued (taken off the queue: nobody will run it)."""

    @abstractmethod
    async def get(self, job_id: str) -> JobRecord:
        """A job's record; :class:`JobNotFound` when unknown or expired."""

    @abstractmethod
    async def save(self, record: JobRecord, *, fence: int | None = None) -> None:
        """Store a record (and refresh its TTL); sets ``record.cancel_requested`` when a cancel is stored.

        ``fence``: the attempt writing; :class:`LeaseLost` when a later attempt holds the job.
        ``None`` is an unfenced write (a record nobody runs: one cancelled before it started).
        """

    @abstractmethod
    async def payload(self, job_id: str) -> bytes:
        """A job's input."""

    @abstractmethod
    async def _write_part(self, job_id: str, part: str, entries: dict[str, str | bytes], fence: int | None) -> None:
        ...

    async def drop_parts(self, job_id: str) -> None:  # noqa: B027 - the in-process store never fills
        """Remove a job's parts (a job that failed because the store is full)."""

    @abstractmethod
    async def read_part(self, job_id: str, part: str) -> dict[str, bytes]:
        """Every entry of one of a job's parts (empty when none was written, or it expired)."""

    async def read_entry(self, job_id: str, part: str, key: str) -> bytes | None:
        """One entry of a job's part (None when absent); stores read just that entry where they can."""
        return (await self.read_part(job_id, part)).get(key)

    async def write_part(self, job_id: str, part: str, entries: dict[str, str | bytes], *,
                         fence: int | None = None) -> None:
        """Add (or replace) entries of a declared part (fenced like :meth:`save`); it expires with the job."""
        if part not in self.parts:
            raise ValueError(f"undeclared job part {part!r} (declared: {self.parts})")
        if entries:
            await self._write_part(job_id, part, entries, fence)

    def watch_store(self, monitor: StoreMonitor, dependency: str) -> None:
        """Let workers wait for ``monitor`` to see the store back instead of retrying it on a timer."""
        self._monitor, self._dependency = monitor, dependency

    async def _store_back(self) -> None:
        await asyncio.sleep(0.5 if self._monitor else 1.0)  # never a hot loop, whatever the error was
        if self._monitor is None:
            return
        self._monitor.recheck()
        with suppress(TimeoutError):  # bounded, so a stop is noticed
            await asyncio.wait_for(self._monitor.wait_up(self._dependency), 5.0)

    async def start(self) -> None:
        """Start this instance's workers (and lease keeping, where there is one)."""
        self._tasks += [asyncio.create_task(self._work_loop()) for _ in range(self.workers)]

    async def close(self) -> None:
        """Stop workers; a job in progress stays leased and is taken up again (by any instance)."""
        self._stopping.set()
        pending = set(self._tasks)
        while pending:  # again until gone: a cancel that lands inside a Redis call can be swallowed there
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=0.5)

    # -- the interface ---------------------------------------------------------------------------
    async def submit(self, kind: str, subject: str, payload: bytes, total: int = 0,
                     meta: dict[str, Any] | None = None) -> JobRecord:
        """Queue a job (with the current trace context in its meta); :class:`QueueFull` when too many wait."""
        if kind not in self.handlers:
            raise ValueError(f"no handler for {kind!r}")
        now = now_ms()
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        record = JobRecord(id=uuid.uuid4().hex, kind=kind, subject=subject, total=total, created_unix_ms=now,
                           updated_unix_ms=now, meta={**(meta or {}), "trace": carrier})
        await self._put(record, payload)
        return record

    async def cancel(self, job_id: str) -> JobRecord:
        """Ask a job to stop: a queued one ends at once, a running one at its next checkpoint.

        Only the flag is written for a job that runs (its runner's writes stay its own); a job taken
        off the queue by the cancel itself is failed here, as nobody else will run it.
        """
        record = await self.get(job_id)
        if record.state in FINISHED:
            return record
        if await self._cancel(job_id):
            record = await self.get(job_id)
            record.state, record.errors = "failed", [*record.errors, "cancelled before it started"]
            await self.save(record)
        else:
            record = await self.get(job_id)
        record.cancel_requested = record.cancel_requested or record.state not in FINISHED
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
            except JobStoreUnavailable as err:  # the move may have landed without its answer: hand back strays
                log.debug("job queue unavailable: %s", err)
                await self._give_back(None)
                continue
            if job_id is None:
                continue
            self._held.add(job_id)
            try:
                await self.run(job_id)
                await self._release(job_id)
            except LeaseLost:  # another attempt holds it now: this one's work stops, nothing more is written
                log.warning("job %s was taken over by a later attempt (this instance's lease lapsed)", job_id)
            except JobStoreUnavailable as err:
                # The attempt stops here; this instance still beats, so its lease would never lapse and
                # nobody else would ever take the job: it goes back to the queue as soon as the store
                # answers, and the next attempt (here or elsewhere) resumes it from its recorded point.
                log.warning("job %s interrupted by the job store, requeued once it is back: %s", job_id, err)
                await self._give_back([job_id])
            finally:
                self._held.discard(job_id)

    async def _give_back(self, job_ids: list[str] | None) -> None:
        """Wait for the store, then requeue ``job_ids`` (``None``: strays, see :meth:`_requeue`).

        Tried until it works or this instance stops (:meth:`close` then gives back everything it holds).
        """
        while not self._stopping.is_set():
            await self._store_back()
            try:
                moved = await self._requeue(job_ids)
            except JobStoreUnavailable as err:
                log.debug("job store still unavailable: %s", err)
                continue
            if moved:
                log.warning("requeued %d job(s) interrupted by the job store", moved)
            return

    async def run(self, job_id: str) -> None:
        """Run one job to its end (succeeded, failed with its reason, or cancelled)."""
        try:
            record = await self.get(job_id)
        except JobNotFound:
            return  # expired before a worker got to it
        if record.state in FINISHED:
            return
        record.attempts = await self._claim(job_id)
        # The job runs later, maybe elsewhere: its own trace, linked to the request that submitted it.
        submitted = trace.get_current_span(propagate.extract(record.meta.get("trace") or {})).get_span_context()
        links = [trace.Link(submitted)] if submitted.is_valid else []
        with self.tracer.start_as_current_span(
                f"{record.kind}.job", context=context.Context(), links=links,
                attributes={"mesh.job.id": record.id, "mesh.job.kind": record.kind,
                            "mesh.job.attempt": record.attempts}) as span:
            await self._run(record)
            if record.state == "failed":
                span.set_status(trace.StatusCode.ERROR, record.errors[-1] if record.errors else "failed")

    async def _run(self, record: JobRecord) -> None:
        record.state = "running"
        await self.save(record, fence=record.attempts)
        ctx = JobContext(self, record)
        try:
            result = await self.handlers[record.kind](record, await self.payload(record.id), ctx)
            record.result = result
            record.state = "failed" if record.failed_batches or record.errors else "succeeded"
        except Cancelled:
            record.state, record.errors = "failed", [*record.errors, "cancelled"]
            record.cancel_requested = True
        except JobStoreFull as exc:
            # Retrying would fill it again from the first page: the job ends failed, its partial results
            # removed so that the failed record itself can be written.
            log.warning("%s job %s failed: %s", record.kind, record.id, exc)
            record.state, record.errors = "failed", [*record.errors, f"{exc}; its partial results were removed, "
                                                                      "submit it again later"]
            await self.drop_parts(record.id)
        except (asyncio.CancelledError, JobStoreUnavailable, LeaseLost):
            raise  # stopping, Redis lost (the job stays leased, resumes elsewhere), or another attempt holds it
        except Exception as exc:  # noqa: BLE001 - a job always ends, with its reason; the traceback is logged
            log.exception("%s job %s failed unexpectedly", record.kind, record.id)
            record.state, record.errors = "failed", [*record.errors, f"internal: {type(exc).__name__}: {exc}"]
        await self.save(record, fence=ctx.fence)
        # One line per completed attempt (the store refuses a second one), no user data: counted by bench.jobs_store.
        log.info("%s job %s %s (attempt %d)", record.kind, record.id, record.state, record.attempts,
                 extra={"job_id": record.id, "job_kind": record.kind, "job_state": record.state,
                        "job_attempt": record.attempts})
