"""MemoryJobs (services/bootstrap/jobs.py): submit, run, progress, resume, cancel, failures, a full queue.

Handlers wait on asyncio.Events the test sets, and the test waits on the store's own saves
(support.jobs), so nothing here sleeps and hopes.
"""

from __future__ import annotations

import asyncio

import pytest

from services.bootstrap.jobs import JobContext, JobNotFound, JobRecord, QueueFull
from support.jobs import GatedHandler, ObservedMemoryJobs

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_submit_then_a_worker_runs_it_to_the_end():
    handler = GatedHandler(3)
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"three books", total=3)
    assert record.state == "queued" and len(record.id) == 32 and record.subject == "books"
    assert (await jobs.get(record.id)).state == "queued"
    await jobs.start()
    try:
        done = await jobs.finished(record.id)
    finally:
        await jobs.close()
    assert done.state == "succeeded" and done.done == done.total == 3 and done.resume == 3 and done.attempts == 1
    assert done.result == {"payload": "three books", "items": 3} and done.errors == []
    assert handler.processed == [0, 1, 2]
    assert await jobs.get(record.id) == done


async def test_progress_is_visible_while_running_and_a_resumed_job_continues():
    handler = GatedHandler(4, pause_at=2)
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"x")
    run = asyncio.create_task(jobs.run(record.id))
    await asyncio.wait_for(handler.reached.wait(), 10)
    midway = await jobs.get(record.id)
    assert midway.state == "running" and midway.done == 2 and midway.total == 4 and midway.resume == 2
    run.cancel()  # the instance stops mid-job: the record stays running with its resume point
    with pytest.raises(asyncio.CancelledError):
        await run
    assert (await jobs.get(record.id)).state == "running"

    handler.pause_at = None
    await jobs.run(record.id)  # taken up again: continues at the resume point, not from the start
    done = await jobs.get(record.id)
    assert done.state == "succeeded" and done.attempts == 2 and done.done == 4
    assert handler.processed == [0, 1, 2, 3] and handler.calls == 2


async def test_cancel_a_queued_job_ends_it_before_it_starts():
    handler = GatedHandler(2)
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"x")
    cancelled = await jobs.cancel(record.id)
    assert cancelled.state == "failed" and cancelled.cancel_requested
    assert cancelled.errors == ["cancelled before it started"]
    await jobs.run(record.id)  # a worker that takes it later does not run it
    assert handler.calls == 0 and (await jobs.get(record.id)).state == "failed"


async def test_cancel_a_running_job_stops_it_at_its_next_checkpoint():
    handler = GatedHandler(4, pause_at=1)
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"x")
    await jobs.start()
    try:
        await asyncio.wait_for(handler.reached.wait(), 10)
        asked = await jobs.cancel(record.id)
        assert asked.state == "running" and asked.cancel_requested
        handler.gate.set()
        done = await jobs.finished(record.id)
    finally:
        await jobs.close()
    assert done.state == "failed" and done.errors == ["cancelled"]
    assert handler.processed == [0, 1]  # item 1's checkpoint saw the cancel; 2 and 3 never ran
    assert done.done == 2  # item 1 was processed before its checkpoint saw the cancel
    again = await jobs.cancel(record.id)  # cancelling a finished job changes nothing
    assert again.state == "failed" and again.errors == ["cancelled"]


async def test_a_cancelled_job_keeps_saying_it_was_cancelled():
    handler = GatedHandler(2, pause_at=1)
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"x")
    run = asyncio.create_task(jobs.run(record.id))
    await asyncio.wait_for(handler.reached.wait(), 10)
    await jobs.cancel(record.id)
    handler.gate.set()
    await run
    done = await jobs.get(record.id)
    assert done.state == "failed" and done.errors == ["cancelled"]
    assert done.cancel_requested


async def test_a_handler_exception_ends_the_job_with_its_reason():
    async def broken(record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        await ctx.progress(done=1, total=2)
        raise ValueError("batch 2 is malformed")

    jobs = ObservedMemoryJobs({"ingest": broken})
    record = await jobs.submit("ingest", "books", b"x")
    await jobs.run(record.id)
    done = await jobs.get(record.id)
    assert done.state == "failed" and done.done == 1
    assert done.errors == ["internal: ValueError: batch 2 is malformed"]


async def test_recorded_errors_make_a_returned_job_failed():
    async def partial(record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        await ctx.progress(done=1, total=2)
        await ctx.progress(error="batch 1: id d7 is duplicated", failed_batch=True)
        return {"written": 1}

    jobs = ObservedMemoryJobs({"ingest": partial})
    record = await jobs.submit("ingest", "books", b"x")
    await jobs.run(record.id)
    done = await jobs.get(record.id)
    assert done.state == "failed" and done.failed_batches == 1 and done.result == {"written": 1}
    assert done.errors == ["batch 1: id d7 is duplicated"]


async def test_a_full_queue_refuses_and_unknown_jobs_are_not_found():
    jobs = ObservedMemoryJobs({"ingest": GatedHandler(1)}, max_queued=2)
    await jobs.submit("ingest", "a", b"")
    await jobs.submit("ingest", "b", b"")
    with pytest.raises(QueueFull):
        await jobs.submit("ingest", "c", b"")
    with pytest.raises(ValueError, match="no handler"):
        await jobs.submit("reindex", "a", b"")
    for job_id in ["0" * 32, "../../etc", "ABC", "0" * 31 + "g"]:
        with pytest.raises(JobNotFound):
            await jobs.get(job_id)
