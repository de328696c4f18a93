"""OCR uploads waiting in Redis are bounded in total: past --max-store-bytes a submit is RESOURCE_EXHAUSTED."""

import asyncio
import io

import numpy as np
import pytest
import redis.asyncio as aioredis
from PIL import Image
from prometheus_client import CollectorRegistry

from services.bootstrap.errors import Overloaded
from services.ocr.config import OcrSettings
from services.ocr.extractor import ExtractOptions
from services.ocr.server import create_ocr_service
from services.runtime.loopguard import starting

pytestmark = pytest.mark.asyncio(loop_scope="session")
LIMIT = 4 * 1024 * 1024


def noise_png(size: int) -> bytes:
    side = int(size ** 0.5) + 1
    pixels = np.random.default_rng(7).integers(0, 256, (side, side), dtype=np.uint8)  # does not compress
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


async def test_uploads_beyond_the_store_limit_are_refused_with_retry(redis_url):
    db = redis_url.rsplit("/", 1)[0] + "/7"
    r = aioredis.from_url(db)
    await r.flushdb()
    used = int((await r.info("memory"))["used_memory"])
    assert used < LIMIT, "a fresh Redis already holds more than the test's limit"
    s = OcrSettings(host="127.0.0.1", port=0, metrics_port=-1, engines=1, redis_url=db, job_workers=0,
                    max_bytes=8_000_000, max_pixels=20_000_000, max_store_bytes=LIMIT)
    with starting():  # built by hand here: its start-up is not serving yet
        service = await create_ocr_service(s, registry=CollectorRegistry())
    try:
        small, large = await asyncio.to_thread(lambda: (noise_png(200_000), noise_png(LIMIT)))  # off the loop
        first = await service.jobs.submit([small], ExtractOptions())  # fits: stored and queued
        assert first["state"] == "QUEUED"
        with pytest.raises(Overloaded) as refused:
            await service.jobs.submit([large], ExtractOptions())
        assert refused.value.retry_after_s > 0 and "--max-store-bytes" in refused.value.message
        assert await r.llen("jobs:{ocr}:queue") == 1  # the refused job left nothing behind
    finally:
        await service.close()
        await r.flushdb()
        await r.aclose()
