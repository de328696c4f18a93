"""OCR service on port 0 with real Tesseract (kor+eng) and a real Redis: reading, bad input, jobs, VLM fallback."""

from __future__ import annotations

import asyncio
import io
import struct
import zlib

import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from mesh.ocr.v1 import ocr_pb2 as pb
from mesh.ocr.v1 import ocr_pb2_grpc as pb_grpc
from PIL import Image

from bench.ocr_set import build_set, cer
from services.ocr.extractor import ExtractOptions
from services.ocr.vlm import OpenAIVisionReader
from support import eventually_async
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")
SAMPLES = {s.name: s for s in build_set(per_category=2)}


def settings(redis_url: str, **overrides) -> dict:
    """OcrSettings fields of these tests' services (for :func:`support.servers.running_ocr`)."""
    base = dict(host="127.0.0.1", port=0, metrics_port=-1, engines=1, redis_url=redis_url, job_workers=1,
                max_bytes=3_000_000, max_pixels=20_000_000, max_pages=6)
    base.update(overrides)
    return base


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ocr(redis_url):
    async with running_ocr(**settings(redis_url)) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        yield pb_grpc.OcrServiceStub(channel), service


def pdf_of(*images: Image.Image) -> bytes:
    buf = io.BytesIO()
    first, *rest = [im.convert("RGB") for im in images]
    first.save(buf, format="PDF", save_all=True, append_images=rest, resolution=100)
    return buf.getvalue()


def bad_request(err: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(err)
    fields = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields += [v.field for v in bad.field_violations]
    return fields


async def test_extract_reads_korean_with_lines_boxes_and_timings(ocr):
    stub, _ = ocr
    sample = SAMPLES["paragraph-00"]
    resp = await stub.Extract(pb.ExtractRequest(content=sample.png()), timeout=30)
    (page,) = resp.pages
    assert page.engine == pb.ENGINE_TESSERACT and not page.fallback_reason
    assert cer(sample.truth, page.text) < 0.1, page.text
    assert len(page.lines) == len(sample.truth.splitlines())
    for line in page.lines:
        assert 0 < line.confidence <= 100 and line.box.width > 0 and line.box.height > 0
        assert line.box.left + line.box.width <= page.ocr_width
    tops = [ln.box.top for ln in page.lines]
    assert tops == sorted(tops)
    assert page.timings.ocr_ns > 0 and page.timings.total_ns >= page.timings.ocr_ns
    assert resp.text == page.text


async def test_rotated_page_is_deskewed(ocr):
    stub, _ = ocr
    sample = SAMPLES["rotated-00"]
    straight = await stub.Extract(pb.ExtractRequest(content=sample.png()), timeout=30)
    raw = await stub.Extract(pb.ExtractRequest(content=sample.png(), options=pb.Options(disable_deskew=True)),
                             timeout=30)
    assert abs(straight.pages[0].skew_degrees) >= 3
    assert raw.pages[0].skew_degrees == 0
    assert cer(sample.truth, straight.pages[0].text) < cer(sample.truth, raw.pages[0].text)


async def test_exif_orientation_is_applied(ocr):
    stub, _ = ocr
    sample = SAMPLES["paragraph-01"]
    turned = sample.image.rotate(90, expand=True)  # stored sideways, EXIF says "rotate 270 to view"
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    turned.save(buf, format="JPEG", exif=exif, quality=95)
    resp = await stub.Extract(pb.ExtractRequest(content=buf.getvalue()), timeout=30)
    assert cer(sample.truth, resp.pages[0].text) < 0.15, resp.pages[0].text


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims ``width``x``height`` (a decompression bomb's header) with a tiny body."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


async def test_bad_input_is_invalid_argument_and_the_service_keeps_serving(ocr):
    stub, _ = ocr
    good = SAMPLES["paragraph-00"].png()
    truncated = good[: len(good) // 2]
    oversized = b"\x89PNG\r\n\x1a\n" + b"\0" * 3_000_001
    cases = {
        "zero bytes": b"", "not an image": "안녕하세요, 이건 그림이 아닙니다".encode() * 10,
        "truncated": truncated, "bomb": _png_header_only(30000, 30000), "oversized": oversized,
        "unreadable pdf": b"%PDF-1.7\n" + b"garbage" * 100,
    }
    for name, data in cases.items():
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Extract(pb.ExtractRequest(content=data), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert bad_request(info.value) == ["content"], name
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Extract(pb.ExtractRequest(content=good, options=pb.Options(languages="klingon")), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(info.value) == ["options.languages"]
    resp = await stub.Extract(pb.ExtractRequest(content=good), timeout=30)
    assert resp.pages[0].text


async def test_pdf_pages_and_sync_page_limit(ocr):
    stub, _ = ocr
    a, b, c = SAMPLES["paragraph-00"], SAMPLES["receipt-00"], SAMPLES["paragraph-01"]
    resp = await stub.Extract(pb.ExtractRequest(content=pdf_of(a.image, b.image)), timeout=60)
    assert [p.index for p in resp.pages] == [0, 1]
    assert cer(a.truth, resp.pages[0].text) < 0.15 and cer(b.truth, resp.pages[1].text) < 0.15
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Extract(pb.ExtractRequest(content=pdf_of(a.image, b.image, c.image)), timeout=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "SubmitJob" in info.value.details()


async def _wait_done(stub, job_id: str, timeout_s: float = 90) -> pb.Job:
    seen = []

    async def job() -> pb.Job:
        got = (await stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=5)).job
        seen.append(got.pages_done)
        return got

    done = await eventually_async(job, lambda j: j.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED),
                                  timeout_s=timeout_s, every_s=0.1, what=f"job {job_id} finished")
    assert seen == sorted(seen)  # progress never goes back
    return done


async def test_job_lifecycle_across_instances(ocr, redis_url):
    stub, _ = ocr
    # A second instance with no workers takes the submission; the first instance's worker runs it.
    async with running_ocr(**settings(redis_url, job_workers=0)) as front, \
            grpc.aio.insecure_channel(f"127.0.0.1:{front.port}") as channel:
        front_stub = pb_grpc.OcrServiceStub(channel)
        a, b, c = SAMPLES["paragraph-00"], SAMPLES["receipt-01"], SAMPLES["cover-00"]
        submitted = (await front_stub.SubmitJob(pb.SubmitJobRequest(contents=[pdf_of(a.image, b.image), c.png()]),
                                                timeout=30)).job
        assert submitted.state == pb.JOB_STATE_QUEUED and submitted.pages_total == 3
        assert submitted.expires_unix_ms > submitted.created_unix_ms
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await front_stub.GetJobResult(pb.GetJobResultRequest(job_id=submitted.job_id), timeout=5)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        job = await _wait_done(front_stub, submitted.job_id)
        assert job.state == pb.JOB_STATE_SUCCEEDED and job.pages_done == 3
        result = await front_stub.GetJobResult(pb.GetJobResultRequest(job_id=submitted.job_id), timeout=5)
        assert [p.index for p in result.pages] == [0, 1, 2]
        for page, sample in zip(result.pages, (a, b, c), strict=True):
            assert page.text and cer(sample.truth, page.text) < 0.5


async def test_job_errors(ocr):
    stub, _ = ocr
    for job_id, code in (("nope", grpc.StatusCode.NOT_FOUND), ("", grpc.StatusCode.INVALID_ARGUMENT)):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=5)
        assert info.value.code() == code
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.SubmitJob(pb.SubmitJobRequest(contents=[SAMPLES["paragraph-00"].png(), b"not an image"]),
                             timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad_request(info.value) == ["contents[1]"]
    seven = pdf_of(*[SAMPLES["paragraph-00"].image] * 7)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.SubmitJob(pb.SubmitJobRequest(contents=[seven]), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_job_of_a_crashed_instance_is_requeued_and_finishes(redis_url):
    # Own Redis database, so no other worker races the staging. A worker-less instance takes the
    # job; a "crashed" worker holds it on its running list under a lease that lapsed; a worker
    # started afterwards requeues it at start-up and finishes it.
    db = redis_url.rsplit("/", 1)[0] + "/3"
    async with running_ocr(**settings(db, job_workers=0)) as front:
        job = await front.jobs.submit([SAMPLES["photo-00"].png()], ExtractOptions())
        store = front.jobs.store
        crashed = store.running_list("deadbeef0000")
        moved = await store.redis.lmove(store.queue, crashed, "RIGHT", "RIGHT")
        assert moved.decode() == job["job_id"]
        await store.redis.zadd(store.leases, {"deadbeef0000": 1})  # its lease lapsed long ago
        assert (await front.jobs.status(job["job_id"]))["state"] == "QUEUED"
        async with running_ocr(**settings(db, job_workers=1)):  # the worker
            async with grpc.aio.insecure_channel(f"127.0.0.1:{front.port}") as channel:
                done = await _wait_done(pb_grpc.OcrServiceStub(channel), job["job_id"])
            assert done.state == pb.JOB_STATE_SUCCEEDED and done.pages_done == 1
            assert await store.redis.llen(crashed) == 0


async def test_a_job_runs_in_its_own_trace_linked_to_the_submit_request(redis_url):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    db = redis_url.rsplit("/", 1)[0] + "/5"  # own database: only this traced instance's worker takes the job
    async with running_ocr(tracer_provider=provider, **settings(db, job_workers=1)) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        stub = pb_grpc.OcrServiceStub(channel)
        submitted = (await stub.SubmitJob(pb.SubmitJobRequest(contents=[SAMPLES["receipt-00"].png()]),
                                          timeout=30)).job
        assert (await _wait_done(stub, submitted.job_id)).state == pb.JOB_STATE_SUCCEEDED

        async def job_spans():
            return [s for s in exporter.get_finished_spans() if s.name == "ocr.job"]

        (job,) = await eventually_async(job_spans, bool, what="the ocr.job span ended")
    (request,) = [s for s in exporter.get_finished_spans() if s.name.endswith("OcrService/SubmitJob")]
    assert job.parent is None and job.context.trace_id != request.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in job.links] == [
        (request.context.trace_id, request.context.span_id)]
    assert job.attributes["mesh.job.id"] == submitted.job_id and job.status.is_ok


async def test_vlm_fallback_only_when_tesseract_fails(redis_url, vision_standin):
    reader = OpenAIVisionReader(vision_standin.url, "standin-vlm")
    blank = io.BytesIO()
    Image.new("RGB", (320, 200), (250, 250, 250)).save(blank, format="PNG")
    # The same upload is sent again to see the VLM's answers change: no OCR cache here.
    async with running_ocr(reader=reader, **settings(redis_url, job_workers=0, vlm_timeout_s=2.0,
                                                      ocr_cache_ttl_s=0)) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        stub = pb_grpc.OcrServiceStub(channel)
        ok = await stub.Extract(pb.ExtractRequest(content=SAMPLES["paragraph-00"].png()), timeout=30)
        assert ok.pages[0].engine == pb.ENGINE_TESSERACT and not vision_standin.requests
        resp = await stub.Extract(pb.ExtractRequest(content=blank.getvalue()), timeout=30)
        page = resp.pages[0]
        assert page.fallback_reason == "no_text" and page.engine == pb.ENGINE_VLM
        assert page.text.startswith("스탠드인 판독 320x200") and len(page.lines) == 2
        assert page.timings.vlm_ns > 0 and len(vision_standin.requests) == 1
        off = await stub.Extract(pb.ExtractRequest(content=blank.getvalue(),
                                                   options=pb.Options(disable_fallback=True)), timeout=30)
        assert off.pages[0].engine == pb.ENGINE_TESSERACT and off.pages[0].fallback_error
        vision_standin.stall_s = 4.0  # over the 2 s VLM timeout: Tesseract's (empty) answer stands
        slow = await stub.Extract(pb.ExtractRequest(content=blank.getvalue()), timeout=30)
        assert slow.pages[0].engine == pb.ENGINE_TESSERACT and "timed out" in slow.pages[0].fallback_error


async def test_without_a_vlm_the_failure_is_reported(ocr):
    stub, _ = ocr
    blank = io.BytesIO()
    Image.new("L", (300, 100), 255).save(blank, format="PNG")
    page = (await stub.Extract(pb.ExtractRequest(content=blank.getvalue()), timeout=30)).pages[0]
    assert page.fallback_reason == "no_text" and page.fallback_error.startswith("vlm_disabled")
    assert page.text == "" and page.engine == pb.ENGINE_TESSERACT


async def test_cached_pages_live_on_an_evicting_redis_and_jobs_succeed_when_it_is_full(redis_url, tmp_path):
    """Before (issue 59): the OCR cache shared the job store's Redis (noeviction), so cached pages filled it.

    Now the cache has its own URL: a small allkeys-lru Redis, filled to its maxmemory beforehand, evicts
    instead of refusing, no cached page lands in the job store, and every job succeeds.
    """
    import redis

    from support import RedisServer, off_loop

    def fill(direct) -> None:
        direct.config_set("maxmemory", "2mb")
        direct.config_set("maxmemory-policy", "allkeys-lru")
        for i in range(400):  # 4 MB of other cached values through the 2 MB cache: full before the jobs
            direct.set(f"qv:{i}", b"x" * 10_000)

    async with off_loop(RedisServer(tmp_path / "ocr-cache")) as cache:
        direct = redis.Redis.from_url(cache.url_for(0))
        await asyncio.to_thread(fill, direct)
        db = redis_url.rsplit("/", 1)[0] + "/6"  # own database: only this instance's worker takes the jobs
        async with running_ocr(**settings(db, cache_redis_url=cache.url_for(0))) as service, \
                grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = pb_grpc.OcrServiceStub(channel)
            for name in ("receipt-00", "receipt-00", "paragraph-00"):  # the second read is a cache hit
                job = (await stub.SubmitJob(pb.SubmitJobRequest(contents=[SAMPLES[name].png()]), timeout=30)).job
                assert (await _wait_done(stub, job.job_id)).state == pb.JOB_STATE_SUCCEEDED
            jobs_store = redis.Redis.from_url(db)
            # nothing cached in the job store
            assert not await asyncio.to_thread(lambda: list(jobs_store.scan_iter("ocr-cache:*")))
            assert await asyncio.to_thread(lambda: list(direct.scan_iter("ocr-cache:*")))
            assert int((await asyncio.to_thread(direct.info, "stats"))["evicted_keys"]) > 0
            jobs_store.close()
        direct.close()


async def test_masked_pngs_are_counted_against_the_store_bound_at_admission(tmp_path):
    """Before (issue 59): only the uploads were counted, so PNG jobs filled the job store after admission.

    Its own Redis: the session's shared one shrinks when earlier tests' keys expire, and a bound taken
    from its memory before the service started then had room for the PNG (CI, stop 87).
    """
    import redis

    from support import RedisServer, off_loop

    async with off_loop(RedisServer(tmp_path / "jobs")) as server:
        db = server.url_for(0)
        direct = redis.Redis.from_url(db)
        used = int((await asyncio.to_thread(direct.info, "memory"))["used_memory"])
        direct.close()
        await _masked_pngs_refused(db, used + 600 * 1024)  # room for the upload, not for a 1 MiB page PNG


async def _masked_pngs_refused(db: str, bound: int) -> None:
    async with running_ocr(**settings(db, job_workers=0, max_store_bytes=max(bound, 1024 * 1024 + 1))) as service, \
            grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        stub = pb_grpc.OcrServiceStub(channel)
        upload = SAMPLES["receipt-00"].png()
        plain = await stub.SubmitMaskingJob(pb.SubmitMaskingJobRequest(contents=[upload]), timeout=30)
        assert plain.job.job_id
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitMaskingJob(pb.SubmitMaskingJobRequest(
                contents=[upload], masking=pb.MaskingOptions(masked_png=True)), timeout=30)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "masked PNGs" in info.value.details()
