"""MemoryJobs (services/runtime/jobs): submit, run, progress, resume, cancel, failures, a full queue,
parts, meta, and the job span's link to the request that submitted it (spans from an in-memory exporter).

Handlers wait on asyncio.Events the test sets, and the test waits on the store's own saves
(support.jobs), so nothing here sleeps and hopes.
"""

from __future__ import annotations

import asyncio

import pytest

from services.runtime.jobs import JobContext, JobNotFound, JobRecord, QueueFull
from support.jobs import GatedHandler, ObservedMemoryJobs

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def paused_run(handler: GatedHandler) -> tuple[ObservedMemoryJobs, JobRecord, asyncio.Task]:
    """A job for ``handler`` submitted and run as a task until the handler stops at its pause point:
    (the store, the job's record, the run)."""
    jobs = ObservedMemoryJobs({"ingest": handler})
    record = await jobs.submit("ingest", "books", b"x")
    run = asyncio.create_task(jobs.run(record.id))
    await asyncio.wait_for(handler.reached.wait(), 10)
    return jobs, record, run


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
    jobs, record, run = await paused_run(handler)
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
    jobs, record, run = await paused_run(handler)
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


async def test_parts_keep_partial_results_beside_the_record_and_only_declared_ones():
    async def pages(record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        already = await ctx.read_part("pages")
        await ctx.write_part("pages", {"0": "첫 쪽", "1": b"second"})
        await ctx.write_part("pages", {"1": "둘째 쪽"})  # a later write replaces an entry
        with pytest.raises(ValueError, match="undeclared"):
            await ctx.write_part("notes", {"0": "x"})
        return {"before": len(already)}

    jobs = ObservedMemoryJobs({"read": pages}, parts=("pages",))
    record = await jobs.submit("read", "", b"x")
    assert await jobs.read_part(record.id, "pages") == {}
    await jobs.run(record.id)
    done = await jobs.get(record.id)
    assert done.state == "succeeded" and done.result == {"before": 0}
    assert await jobs.read_part(record.id, "pages") == {"0": "첫 쪽".encode(), "1": "둘째 쪽".encode()}


async def test_meta_is_kept_and_carries_the_submitters_trace_context():
    _, provider = _traced()
    jobs = ObservedMemoryJobs({"ingest": GatedHandler(1)}, tracer_provider=provider)
    with provider.get_tracer("test").start_as_current_span("POST /v1/collections/{name}/documents") as request:
        record = await jobs.submit("ingest", "books", b"x", meta={"options": {"lang": "kor"}})
    assert record.meta["options"] == {"lang": "kor"}
    assert record.meta["trace"]["traceparent"].split("-")[2] == format(request.get_span_context().span_id, "016x")
    assert (await jobs.get(record.id)).meta == record.meta


async def test_a_job_runs_in_its_own_trace_linked_to_the_request_that_submitted_it():
    exporter, provider = _traced()
    jobs = ObservedMemoryJobs({"ingest": GatedHandler(2)}, tracer_provider=provider)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("POST /v1/collections/{name}/documents") as request:
        linked = await jobs.submit("ingest", "books", b"x")
    unlinked = await jobs.submit("ingest", "books", b"y")  # submitted outside any request: no link
    with tracer.start_as_current_span("the worker's own context"):  # never the job span's parent
        await jobs.run(linked.id)
        await jobs.run(unlinked.id)

    spans = {s.attributes["mesh.job.id"]: s for s in exporter.get_finished_spans() if s.name == "ingest.job"}
    first, second = spans[linked.id], spans[unlinked.id]
    assert first.parent is None and second.parent is None
    assert first.context.trace_id != request.get_span_context().trace_id  # its own trace ...
    assert [link.context.span_id for link in first.links] == [request.get_span_context().span_id]  # ... linked
    assert [link.context.trace_id for link in first.links] == [request.get_span_context().trace_id]
    assert not second.links
    assert first.attributes["mesh.job.kind"] == "ingest" and first.attributes["mesh.job.attempt"] == 1
    assert first.status.is_ok


async def test_a_failed_job_span_says_why():
    async def broken(record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        raise ValueError("batch 2 is malformed")

    exporter, provider = _traced()
    jobs = ObservedMemoryJobs({"ingest": broken}, tracer_provider=provider)
    record = await jobs.submit("ingest", "books", b"x")
    await jobs.run(record.id)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "ingest.job"]
    assert not span.status.is_ok and "batch 2 is malformed" in (span.status.description or "")


def _traced():
    """An in-memory exporter and the provider that feeds it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider
