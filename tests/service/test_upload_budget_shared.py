"""Two gateway instances count queued uploads against one bound, on a real Redis (issue 75, item 6)."""

from __future__ import annotations

import pytest

from gateway.files.budget import UploadBudget
from gateway.http.errors import ApiError
from gateway.tasks.store import RedisKeyValue

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_two_instances_share_the_queued_upload_bound(redis_url):
    url = redis_url.rsplit("/", 1)[0] + "/9"
    first, second = RedisKeyValue(url), RedisKeyValue(url)
    a, b = UploadBudget(first, max_bytes=1_000, ttl_s=60), UploadBudget(second, max_bytes=1_000, ttl_s=60)
    try:
        token = await a.reserve(700)
        with pytest.raises(ApiError) as refused:  # the other instance sees the first one's upload
            await b.reserve(400)
        assert refused.value.status == 503
        assert await b.queued() == 700
        await a.release(token)  # its job ended on the first instance
        await b.reserve(900)
        assert await a.queued() == 900
    finally:
        await first.close()
        await second.close()
