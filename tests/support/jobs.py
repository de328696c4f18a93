"""Job stores a test can wait on: the real MemoryJobs / RedisJobs, plus a notice each time a record is saved.

Not stand-ins: every call goes to the real store; ``save`` only also wakes whoever waits in
:meth:`ObservedJobs.until`, so a test waits for "job X finished" instead of sleeping and hoping.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from services.runtime.jobs import FINISHED, JobContext, JobRecord, Jobs, MemoryJobs
from services.runtime.jobs.redis import RedisJobs


class ObservedJobs(Jobs):
    """Mixin over a real job store: :meth:`until` returns once a saved record of a job satisfies a predicate."""

    _saved: dict[str, JobRecord]
    _changed: asyncio.Condition
    completions: Counter[str]  # job id -> final states this instance stored

    def _observe(self) -> None:
        self._saved = {}
        self._changed = asyncio.Condition()
        self.completions = Counter()

    async def save(self, record: JobRecord, *, fence: int | None = None) -> None:  # noqa: D102
        await super().save(record, fence=fence)  # type: ignore[safe-super]  # the concrete store comes next in the MRO
        if record.state in FINISHED and fence is not None:
            self.completions[record.id] += 1
        async with self._changed:
            self._saved[record.id] = JobRecord.loads(record.dumps())
            self._changed.notify_all()

    async def until(self, job_id: str, predicate: Callable[[JobRecord], bool], timeout_s: float = 20.0) -> JobRecord:
        """The first record of ``job_id`` saved *by this instance* that satisfies ``predicate`` (or the last one)."""
        def met() -> bool:
            seen = self._saved.get(job_id)
            return seen is not None and predicate(seen)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(met), timeout_s)
            return self._saved[job_id]

    async def finished(self, job_id: str, timeout_s: float = 20.0) -> JobRecord:
        """The job's record once this instance saved it in a final state."""
        return await self.until(job_id, lambda r: r.state in FINISHED, timeout_s)


class ObservedMemoryJobs(ObservedJobs, MemoryJobs):
    """The real :class:`MemoryJobs`, observable."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._observe()


class ObservedRedisJobs(ObservedJobs, RedisJobs):
    """The real :class:`RedisJobs`, observable."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._observe()


class GatedHandler:
    """A job handler over ``items`` from the record's resume point; it stops at ``pause_at`` until the gate opens.

    ``reached`` is set when it arrives at ``pause_at``; ``processed`` lists the items this handler did.
    """

    def __init__(self, items: int, pause_at: int | None = None) -> None:
        self.items = items
        self.pause_at = pause_at
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.processed: list[int] = []
        self.calls = 0

    async def __call__(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        self.calls += 1
        for i in range(record.resume, self.items):
            if i == self.pause_at:
                self.reached.set()
                await self.gate.wait()
            self.processed.append(i)
            await ctx.progress(done=i + 1, total=self.items, resume=i + 1)
        return {"payload": payload.decode(), "items": self.items}
