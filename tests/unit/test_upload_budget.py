"""Queued file uploads counted at submit and the job store's refusals named (issue 75, items 5 and 6)."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.files.budget import KEY, UploadBudget
from gateway.http.errors import ApiError, error_response, job_submit_error
from gateway.tasks.store import MemoryKeyValue
from services.runtime.jobs import JobStoreFull, JobStoreUnavailable, QueueFull


def test_uploads_are_counted_in_and_out_and_a_file_past_the_bound_is_a_503():
    async def scenario():
        budget = UploadBudget(MemoryKeyValue(), max_bytes=1_000, ttl_s=60)
        first = await budget.reserve(600)
        with pytest.raises(ApiError) as refused:
            await budget.reserve(500)
        assert refused.value.status == 503 and refused.value.body.error.retry_after_s
        assert "--max-queued-file-bytes" in refused.value.body.error.message
        second = await budget.reserve(400)  # exactly at the bound
        assert await budget.queued() == 1_000
        await budget.release(first)
        assert await budget.queued() == 400
        await budget.reserve(600)
        await budget.release(second)
        assert await budget.queued() == 600

    asyncio.run(scenario())


def test_an_upload_whose_job_never_ended_is_dropped_when_its_job_would_have_expired():
    async def scenario():
        store = MemoryKeyValue()
        budget = UploadBudget(store, max_bytes=1_000, ttl_s=60)
        await store.hset(KEY, "lost", f"900 {int(time.time() * 1000) - 1}", 60)  # an instance died mid-job
        assert await budget.queued() == 0
        await budget.reserve(900)

    asyncio.run(scenario())


def test_no_bound_counts_nothing():
    budget = UploadBudget(MemoryKeyValue(), max_bytes=0, ttl_s=60)
    assert asyncio.run(budget.reserve(10**9))


@pytest.mark.parametrize(("error", "status", "after"), [
    (QueueFull("12 jobs wait"), 429, "5"),
    (JobStoreFull("job store full: OOM command not allowed"), 503, "30"),
    (JobStoreUnavailable("job store unavailable: connection refused"), 503, "5"),
])
def test_a_job_store_refusal_at_submit_says_when_to_come_back(error, status, after):
    response = error_response(job_submit_error(error))
    assert response.status_code == status and response.headers["retry-after"] == after
