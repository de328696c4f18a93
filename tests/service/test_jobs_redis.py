"""RedisJobs (services/bootstrap/jobs.py) on a real redis-server: one job system shared by instances.

Two store instances in one process stand for two gateway processes (each has its own Redis
connections, instance id and lease); the handler waits on events the test sets, and the test waits
on saves (support.jobs), never on sleeps.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from services.bootstrap.jobs import JobNotFound
from support.jobs import GatedHandler, ObservedRedisJobs

pytestmark = pytest.mark.asyncio(loop_scope="session")


def pair(redis_url: str, a: GatedHandler, b: GatedHandler, **options) -> tuple[ObservedRedisJobs, ObservedRedisJobs]:
    """Two instances of one namespace (fresh per test, so tests never see each other's jobs)."""
    ns = f"test-{uuid.uuid4().hex[:8]}"
    return (ObservedRedisJobs({"ingest": a}, redis_url, ns, **options),
            ObservedRedisJobs({"ingest": b}, redis_url, ns, **options))


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
        record = await a.submit("ingest", "books", b"x", total=4)
        await a.start()
        await asyncio.wait_for(first.reached.wait(), 20)
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


async def test_a_live_instance_keeps_its_jobs(redis_url):
    first, second = GatedHandler(2, pause_at=1), GatedHandler(2)
    a, b = pair(redis_url, first, second, lease_s=60.0)
    try:
        record = await a.submit("ingest", "books", b"x")
        await a.start()
        await asyncio.wait_for(first.reached.wait(), 20)
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
        record = await a.submit("ingest", "books", b"x")
        await a.start()
        await asyncio.wait_for(first.reached.wait(), 20)
        await b.start()
        # a dies: its workers and heartbeat stop, but nobody deletes its lease (what a SIGKILL leaves)
        await _die(a)
        done = await b.finished(record.id)
        assert done.state == "succeeded" and done.attempts == 2
        assert first.processed == [0] and second.processed == [1, 2]
    finally:
        await b.close()


async def _die(jobs: ObservedRedisJobs) -> None:
    """Stop an instance the way a killed process stops: tasks gone, lease left to lapse, connections dropped."""
    jobs._stopping.set()
    for task in jobs._tasks:
        task.cancel()
    await asyncio.gather(*jobs._tasks, return_exceptions=True)
    await jobs.redis.aclose()
    await jobs._blocking.aclose()
