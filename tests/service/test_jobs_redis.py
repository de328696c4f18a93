"""RedisJobs (services/runtime/jobs/redis.py) on a real redis-server: one job system shared by instances.

Two store instances in one process stand for two gateway processes (each has its own Redis
connections, instance id and lease); the handler waits on events the test sets, and the test waits
on saves (support.jobs), never on sleeps. Also: parts and their TTL, and the trace link carried
through Redis from the submitting instance to the one that runs the job.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from services.runtime.jobs import JobContext, JobNotFound, JobRecord, JobStoreUnavailable
from support.jobs import GatedHandler, ObservedRedisJobs
from support.waiting import eventually_async

pytestmark = pytest.mark.asyncio(loop_scope="session")


def pair(redis_url: str, a: GatedHandler, b: GatedHandler, **options) -> tuple[ObservedRedisJobs, ObservedRedisJobs]:
    """Two instances of one namespace (fresh per test, so tests never see each other's jobs)."""
    ns = f"test-{uuid.uuid4().hex[:8]}"
    return (ObservedRedisJobs({"ingest": a}, redis_url, ns, **options),
            ObservedRedisJobs({"ingest": b}, redis_url, ns, **options))


async def paused_on(jobs: ObservedRedisJobs, handler: GatedHandler, **submit) -> JobRecord:
    """A job submitted to ``jobs``, whose workers then start and run it until ``handler`` (``jobs``' handler)
    stops at its pause point; the job's record as submitted."""
    record = await jobs.submit("ingest", "books", b"x", **submit)
    await jobs.start()
    await asyncio.wait_for(handler.reached.wait(), 20)
    return record


async def test_a_job_submitted_on_one_instance_is_seen_cancelled_and_run_by_another(redis_url):
    first, second = GatedHandler(2), GatedHandler(2)
    a, b = pair(redis_url, first, second)
    try:
        record = await a.submit("ingest", "books", "두 권".encode(), total=2)
        seen = await b.get(record.id)
        assert seen.state == "queued" and seen.subject == "books" and seen.total == 2
        other = await a.submit("ingest", "books", b"cancel me")
        assert (await b.cancel(other.id)).state == "failed"
        assert (await a.get(other.id)).errors == ["cancelled before it started"]

        await b.start()  # only b works: it takes both jobs from the shared queue
        done = await b.finished(record.id)
        assert done.state == "succeeded" and done.result == {"payload": "두 권", "items": 2}
        assert (await a.get(record.id)) == done
        assert first.processed == [] and second.processed == [0, 1]
        assert (await b.get(other.id)).state == "failed" and second.processed == [0, 1]  # the cancelled one never ran
        with pytest.raises(JobNotFound):
            await a.get(uuid.uuid4().hex)
    finally:
        await a.close()
        await b.close()


async def test_an_instance_that_closes_mid_job_gives_it_up_and_another_resumes_it(redis_url):
    first, second = GatedHandler(4, pause_at=2), GatedHandler(4)
    a, b = pair(redis_url, first, second, lease_s=60.0)  # a long lease: only close() can give it up this fast
    try:
        record = await paused_on(a, first, total=4)
        midway = await b.get(record.id)
        assert midway.state == "running" and midway.resume == 2 and midway.attempts == 1
        await a.close()  # stops its workers and deletes its lease: its running job is an orphan now

        await b.start()  # b's first heartbeat requeues a's orphan, and b's worker takes it up
        done = await b.finished(record.id)
        assert done.state == "succeeded" and done.done == 4 and done.attempts == 2
        assert first.processed == [0, 1] and second.processed == [2, 3]  # resumed at the recorded point
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("heartbeat_lost", [False, True], ids=["beating", "missed-beats-inside-the-lease"])
async def test_a_live_instance_keeps_its_jobs(redis_url, heartbeat_lost):
    first, second = GatedHandler(2, pause_at=1), GatedHandler(2)
    a, b = pair(redis_url, first, second, lease_s=3.0 if heartbeat_lost else 60.0)
    try:
        record = await paused_on(a, first)
        if heartbeat_lost:
            a._tasks[0].cancel()  # a's heartbeat stops: its beats are missed, its last lease still runs
        await b.start()
        assert await b.requeue_orphans() == 0  # a's lease is alive: nothing of a's is taken from it
        first.gate.set()
        done = await a.finished(record.id)
        assert done.state == "succeeded" and done.attempts == 1 and second.processed == []
    finally:
        await a.close()
        await b.close()


async def test_a_job_of_an_instance_that_died_is_resumed_once_its_lease_lapses(redis_url):
    first, second = GatedHandler(3, pause_at=1), GatedHandler(3)
    a, b = pair(redis_url, first, second, lease_s=0.6)
    try:
        record = await paused_on(a, first)
        await b.start()
        # a dies: its workers and heartbeat stop, but nobody deletes its lease (what a SIGKILL leaves)
        await _die(a)
        done = await b.finished(record.id)
        assert done.state == "succeeded" and done.attempts == 2
        assert first.processed == [0] and second.processed == [1, 2]
    finally:
        await b.close()


async def test_the_job_span_on_another_instance_links_to_the_request_that_submitted_it(redis_url):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    a, b = pair(redis_url, GatedHandler(1), GatedHandler(1), tracer_provider=provider)
    try:
        with provider.get_tracer("test").start_as_current_span("POST /v1/collections/{name}/reindex") as request:
            record = await a.submit("ingest", "books", b"x")
        await b.start()  # only b works: the trace context reaches it through the record in Redis
        await b.finished(record.id)
    finally:
        await a.close()
        await b.close()  # the span ends after the final save: closing b waits for its worker to be done
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "ingest.job"]
    assert span.parent is None and span.attributes["mesh.job.id"] == record.id
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (request.get_span_context().trace_id, request.get_span_context().span_id)]


async def test_parts_expire_with_the_job_and_every_save_refreshes_them(redis_url):
    async def pages(record: JobRecord, payload: bytes, ctx: JobContext) -> dict:
        await ctx.write_part("pages", {"0": "첫 쪽"})
        await ctx.write_part("pages", {"1": b"second"})
        return {}

    ns = f"test-{uuid.uuid4().hex[:8]}"
    a = ObservedRedisJobs({"read": pages}, redis_url, ns, ttl_s=600, parts=("pages",))
    try:
        record = await a.submit("read", "", b"x")
        await a.run(record.id)
        assert (await a.get(record.id)).state == "succeeded"
        assert await a.read_part(record.id, "pages") == {"0": "첫 쪽".encode(), "1": b"second"}
        assert await _read_part_elsewhere(redis_url, ns, record.id) == {"0": "첫 쪽".encode(), "1": b"second"}
        part = f"{a.prefix}:job:{record.id}:pages"
        assert 0 < await a.redis.ttl(part) <= 600
        await a.redis.expire(part, 5)
        await a.save(await a.get(record.id))  # any change to the job keeps its parts as long as its record
        assert await a.redis.ttl(part) > 5 and await a.redis.ttl(f"{a.prefix}:job:{record.id}") > 5
        assert await a.read_part(uuid.uuid4().hex, "pages") == {}
        assert await a.used_bytes() > 0
    finally:
        await a.close()


async def _read_part_elsewhere(redis_url: str, ns: str, job_id: str) -> dict[str, bytes]:
    """A part as another instance of the namespace reads it."""
    other = ObservedRedisJobs({}, redis_url, ns, parts=("pages",))
    try:
        return await other.read_part(job_id, "pages")
    finally:
        await other.close()


async def _die(jobs: ObservedRedisJobs) -> None:
    """Stop an instance the way a killed process stops: tasks gone, lease left to lapse, connections dropped."""
    jobs._stopping.set()
    pending = set(jobs._tasks)
    while pending:  # again until gone: a cancel that lands inside a Redis call can be swallowed there
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=0.1)
    await jobs.redis.aclose()
    await jobs._blocking.aclose()


async def test_a_runner_stalled_past_its_lease_has_its_late_writes_refused(redis_url):
    first, second = GatedHandler(3, pause_at=1), GatedHandler(3)
    a, b = pair(redis_url, first, second, lease_s=0.6)
    try:
        record = await paused_on(a, first)
        a._tasks[0].cancel()  # a stalls: no heartbeat, its worker parked at the gate
        await b.start()  # b's heartbeat finds a's lease lapsed and takes the job over
        done = await b.finished(record.id)
        assert done.state == "succeeded" and done.attempts == 2 and second.processed == [1, 2]
        first.gate.set()  # a wakes up and writes its progress with its old fence: refused
        await asyncio.sleep(0.3)
        assert first.processed == [0, 1]  # it did the item, but nothing it wrote landed
        assert await b.get(record.id) == done
        assert a.completions[record.id] == 0 and b.completions[record.id] == 1
    finally:
        await a.close()
        await b.close()


async def test_three_instances_one_dies_every_job_completes_exactly_once(redis_url):
    ns = f"test-{uuid.uuid4().hex[:8]}"
    handlers = [GatedHandler(4, pause_at=2) for _ in range(3)]
    stores = [ObservedRedisJobs({"ingest": h}, redis_url, ns, lease_s=0.6, workers=10) for h in handlers]
    try:
        records = [await stores[0].submit("ingest", "books", str(i).encode()) for i in range(30)]
        for store in stores:
            await store.start()
        await asyncio.wait_for(handlers[0].reached.wait(), 20)  # instance 0 holds some jobs mid-way
        await _die(stores[0])
        for h in handlers[1:]:
            h.gate.set()
        for r in records:
            final = await eventually_async(lambda r=r: stores[1].get(r.id), lambda rec: rec.state == "succeeded",
                                           timeout_s=20, every_s=0.1, what=f"job {r.id} succeeded")
            assert final.state == "succeeded" and final.done == 4, final
        completions = sum((s.completions for s in stores), start=Counter())
        assert all(completions[r.id] == 1 for r in records), completions
        assert stores[0].completions.total() + stores[1].completions.total() + stores[2].completions.total() == 30
    finally:
        for store in stores[1:]:
            await store.close()


async def test_an_orphan_check_is_one_command_however_many_keys_redis_holds(redis_url):
    import redis.asyncio as aioredis

    a, b = pair(redis_url, GatedHandler(1), GatedHandler(1))
    other = aioredis.from_url(redis_url)
    try:
        async def commands_per_check() -> list[str]:
            """The commands the check sends (MONITOR, those a script runs inside it left out)."""
            sent = []
            async with other.monitor() as m:
                await a.beat()
                await b.redis.echo("end")
                while (cmd := await m.next_command())["command"] != "ECHO end":
                    if cmd.get("client_type") != "lua":
                        sent.append(cmd["command"].split()[0])
            return sent

        await a.beat()  # connections open (their handshakes are not the check's)
        await b.redis.echo("warm")
        empty = await commands_per_check()
        async with other.pipeline(transaction=False) as pipe:
            for i in range(5000):
                pipe.set(f"{a.prefix}-noise:{i}", b"x" * 16, ex=60)  # cached vectors or anything else
            await pipe.execute()
        assert await commands_per_check() == empty == ["EVALSHA"]
    finally:
        await a.close()
        await b.close()
        await other.aclose()


async def test_a_job_interrupted_by_a_redis_pause_is_requeued_and_completes_exactly_once(redis_url):
    """Redis stalls past the socket timeout mid-job (CLIENT PAUSE): the instance keeps beating, so its lease
    never lapses; the interrupted job must go back to the queue once Redis answers, not stay "running"."""
    import redis.asyncio as aioredis

    ns = f"test-{uuid.uuid4().hex[:8]}"
    handlers = [GatedHandler(3, pause_at=1), GatedHandler(3), GatedHandler(3)]
    # A lease far longer than the test: only the hand-back can get the job going again.
    stores = [ObservedRedisJobs({"ingest": h}, redis_url, ns, lease_s=120.0, timeout_s=0.3) for h in handlers]
    admin = aioredis.from_url(redis_url)
    try:
        record = await paused_on(stores[0], handlers[0])
        for store in stores[1:]:
            await store.start()
        await admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")  # every client's next command waits 1.5 s
        handlers[0].gate.set()  # the runner's next progress save times out: the attempt stops

        async def seen() -> JobRecord | None:
            try:
                return await stores[1].get(record.id)
            except JobStoreUnavailable:  # still paused
                return None

        final = await eventually_async(seen, lambda r: r is not None and r.state == "succeeded",
                                       timeout_s=20, every_s=0.2, what="the interrupted job succeeded")
        assert final is not None
        assert final.done == 3 and final.attempts == 2, final
        done_items = sorted(set(handlers[0].processed + handlers[1].processed + handlers[2].processed))
        assert done_items == [0, 1, 2]  # resumed from its recorded point: nothing skipped
        completions = sum((s.completions for s in stores), start=Counter())
        assert completions[record.id] == 1, completions
        for store in stores:
            assert await store.redis.llen(store.running) == 0  # nobody holds it any more
    finally:
        for store in stores:
            await store.close()
        await admin.aclose()


async def test_strays_in_an_instances_running_list_go_back_to_the_queue_held_ones_stay(redis_url):
    """A BLMOVE whose answer was lost leaves a job in the list with no worker on it: handed back after a
    failed take; a job a worker of the instance runs is left alone."""
    a, _b = pair(redis_url, GatedHandler(1), GatedHandler(1))
    try:
        stray, held = uuid.uuid4().hex, uuid.uuid4().hex
        await a.redis.rpush(a.running, stray, held)
        a._held.add(held)
        assert await a._requeue(None) == 1
        assert [x.decode() for x in await a.redis.lrange(a.queue, 0, -1)] == [stray]
        assert [x.decode() for x in await a.redis.lrange(a.running, 0, -1)] == [held]
    finally:
        await a.close()
        await _b.close()


async def test_the_job_store_runs_on_a_three_node_redis_cluster(tmp_path):
    """Every key of a namespace hashes to one slot and every script declares its keys: submit, cancel,
    run, parts, a lapsed instance's job resumed by another, all on a real 3-node cluster."""
    from support import off_loop
    from support.redis_server import RedisClusterServers

    async with off_loop(RedisClusterServers(tmp_path / "cluster")) as cluster:
        ns = f"test-{uuid.uuid4().hex[:8]}"
        first, second = GatedHandler(3, pause_at=1), GatedHandler(3)
        a = ObservedRedisJobs({"ingest": first}, cluster.url, ns, lease_s=0.6, cluster=True)
        b = ObservedRedisJobs({"ingest": second}, cluster.url, ns, lease_s=0.6, cluster=True)
        try:
            other = await a.submit("ingest", "books", b"cancel me")
            assert (await b.cancel(other.id)).state == "failed"
            record = await paused_on(a, first, total=3)
            await b.start()
            await _die(a)  # a's lease lapses; b's beat finds it and requeues a's job on the cluster
            done = await b.finished(record.id)
            assert done.state == "succeeded" and done.attempts == 2 and second.processed == [1, 2]
            assert (await b.get(other.id)).errors == ["cancelled before it started"]
        finally:
            await b.close()


async def test_a_job_whose_write_finds_the_store_full_ends_failed_with_its_reason(tmp_path):
    """Before (issue 59): an OOM on a part's write was 'Redis unavailable': the job stayed leased and was
    retried from the first page until its keys expired. Now it ends failed, naming the full store, and its
    partial results are removed so that the failed record can be written."""
    import redis

    from services.runtime.jobs.redis import RedisJobs
    from support import RedisServer, off_loop

    async def fill(record: JobRecord, payload: bytes, ctx: JobContext) -> None:
        for page in range(50):  # 50 x 200 kB: far past the 2 MB below
            await ctx.write_part("png", {str(page): b"x" * 200_000})

    async with off_loop(RedisServer(tmp_path / "full")) as server:
        direct = redis.Redis.from_url(server.url_for(0))
        direct.config_set("maxmemory", "3mb")
        direct.config_set("maxmemory-policy", "noeviction")
        jobs = RedisJobs({"mask": fill}, server.url_for(0), f"t{uuid.uuid4().hex[:6]}", parts=("png",), ttl_s=600)
        await jobs.start()
        try:
            record = await jobs.submit("mask", "scan", b"upload")
            done = await eventually_async(lambda: jobs.get(record.id), lambda r: r.state in ("failed", "succeeded"),
                                          timeout_s=30, what="the job ended")
            assert done.state == "failed" and "job store full" in done.errors[-1], done.errors
            assert not await jobs.read_part(record.id, "png")  # partial results removed
        finally:
            await jobs.close()
            direct.close()


async def test_a_part_with_its_own_ttl_is_not_renewed_by_the_records_saves(redis_url):
    """Masked PNGs (issue 59) keep their own, shorter TTL; the record and its other parts keep the job's."""
    import redis

    from services.runtime.jobs.redis import RedisJobs

    async def work(record: JobRecord, payload: bytes, ctx: JobContext) -> None:
        await ctx.write_part("png", {"0": b"png"})
        await ctx.write_part("pages", {"0": "text"})
        await ctx.progress(done=1)  # a save after the write: it must not renew the png part

    ns = f"t{uuid.uuid4().hex[:6]}"
    jobs = RedisJobs({"mask": work}, redis_url, ns, parts=("pages", "png"), part_ttl_s={"png": 120}, ttl_s=3600)
    await jobs.start()
    try:
        record = await jobs.submit("mask", "scan", b"upload")
        await eventually_async(lambda: jobs.get(record.id), lambda r: r.state == "succeeded", what="the job ended")
        direct = redis.Redis.from_url(redis_url)
        assert 0 < direct.ttl(f"jobs:{{{ns}}}:job:{record.id}:png") <= 120
        assert direct.ttl(f"jobs:{{{ns}}}:job:{record.id}:pages") > 3000
        direct.close()
    finally:
        await jobs.close()
