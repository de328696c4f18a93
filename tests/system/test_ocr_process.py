"""The OCR service as processes over one Redis: a job outlives the process that was reading it."""

from __future__ import annotations

import asyncio
import io

import pytest

from bench.ocr_set import build_set, cer
from clients.ocr import AsyncOcrClient
from services.runtime.processes import start_process, stop_process
from support import RedisServer, eventually_async

pytestmark = pytest.mark.slow


def test_killed_worker_loses_no_job(tmp_path):
    redis = RedisServer(tmp_path / "redis").start()
    url = redis.url
    samples = build_set(per_category=1)
    pages = [s.image.convert("RGB") for s in samples]
    buf = io.BytesIO()
    pages[0].save(buf, format="PDF", save_all=True, append_images=pages[1:] * 2, resolution=100)
    procs = []
    try:
        first, port = start_process("services.ocr", "--port", "0", "--redis-url", url, "--engines", "1")
        procs.append(first)

        async def scenario():
            client = AsyncOcrClient(f"127.0.0.1:{port}")
            job = await client.submit_job([buf.getvalue()])
            assert job.pages_total == 1 + 2 * (len(pages) - 1)
            await eventually_async(lambda: client.get_job(job.id), lambda j: j.pages_done >= 2,
                                   timeout_s=60, what="two pages read")
            first.kill()  # kill -9 mid-job: no clean shutdown, its heartbeat simply stops
            first.wait()
            await client.close()
            second, port2 = start_process("services.ocr", "--port", "0", "--redis-url", url, "--engines", "1")
            procs.append(second)
            client = AsyncOcrClient(f"127.0.0.1:{port2}")
            # the lapsed heartbeat (15 s) lets the new instance requeue the job
            state = await eventually_async(lambda: client.get_job(job.id),
                                           lambda j: j.state in ("succeeded", "failed"),
                                           timeout_s=90, every_s=0.2, what="the job finished on the new instance")
            result = await client.get_job_result(job.id)
            await client.close()
            return state, result

        state, (_, pages_read) = asyncio.run(scenario())
        assert state.state == "succeeded" and state.pages_done == state.pages_total
        assert [p.index for p in pages_read] == list(range(state.pages_total))
        truths = [samples[0].truth] + [s.truth for s in samples[1:]] * 2
        assert sum(cer(t, p.text) for t, p in zip(truths, pages_read, strict=True)) / len(truths) < 0.2
    finally:
        for p in procs:
            stop_process(p)
        redis.stop()
