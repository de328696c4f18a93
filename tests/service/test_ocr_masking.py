"""Word boxes in the uploaded image, /v1/ocr:extract, the OCR cache and masking jobs.

A real OCR service (port 0, Tesseract kor+eng, real Redis) behind the gateway's ASGI app; pages from
bench/masking_set.py, whose personal data and boxes are known.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import time

import grpc
import pytest
import pytest_asyncio
from mesh.ocr.v1 import ocr_pb2 as pb
from mesh.ocr.v1 import ocr_pb2_grpc as pb_grpc
from PIL import Image

from bench.masking_set import _rotate, build
from services.ocr.cache import OcrCache
from services.ocr.extractor import ExtractOptions
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_ocr

pytestmark = pytest.mark.asyncio(loop_scope="session")
PAGES = {s.name: s for s in build("tune", per_condition=1, conditions=("clean", "rotated"))}
ONE_WORD = ("phone", "email", "resident_number", "card", "passport", "driver_license", "alien_number")


def iou(a, b) -> float:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    w, h = min(ax + aw, bx + bw) - max(ax, bx), min(ay + ah, by + bh) - max(ay, by)
    inter = max(0, w) * max(0, h)
    return inter / (aw * ah + bw * bh - inter) if inter else 0.0


def png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mesh(redis_url):
    db = redis_url.rsplit("/", 1)[0] + "/6"
    async with running_ocr(engines=2, redis_url=db, job_workers=1, max_pages=4, job_lease_s=1.0) as svc:
        await svc.jobs.redis.flushdb()
        app = gateway_app(1, 1, ocr_target=f"127.0.0.1:{svc.port}", max_ocr_body_bytes=8_000_000,
                          max_extract_body_bytes=4_000_000)
        async with asgi_client(app) as client, grpc.aio.insecure_channel(f"127.0.0.1:{svc.port}") as channel:
            yield client, pb_grpc.OcrServiceStub(channel), svc


def _best(words: list[tuple[int, int, int, int]], box) -> float:
    return max((iou(w, box) for w in words), default=0.0)


async def test_word_boxes_land_on_the_uploaded_image_of_a_turned_and_scaled_page(mesh):
    _, stub, _ = mesh
    page = PAGES["clean-00"]
    turned, entities = _rotate(page.image, page.entities, 4.0)
    # 2.5x larger than the page: the service reads it at 1,920 pixels and turns it back 4 degrees.
    big = await asyncio.to_thread(turned.resize, (int(turned.width * 2.5), int(turned.height * 2.5)))
    resp = await stub.Extract(pb.ExtractRequest(content=await asyncio.to_thread(png, big)), timeout=60)
    got = resp.pages[0]
    assert (got.image_width, got.image_height) == big.size and abs(got.skew_degrees + 4.0) < 0.6
    words = [(w.box.left, w.box.top, w.box.width, w.box.height) for ln in got.lines for w in ln.words]
    assert len(words) > 40
    single = [e for e in entities if e.kind in ONE_WORD and " " not in e.text]
    scores = [_best(words, tuple(round(v * 2.5) for v in e.box)) for e in single]
    assert len(scores) >= 3 and sum(s >= 0.6 for s in scores) >= len(scores) - 1, scores
    for ln in got.lines:  # every word inside its line, both in the uploaded image
        lb = ln.image_box
        for w in ln.words:
            assert lb.left - 2 <= w.box.left and w.box.left + w.box.width <= lb.left + lb.width + 2


async def test_extract_on_rest_has_words_and_a_repeated_upload_comes_from_the_cache(mesh):
    http, _, svc = mesh
    data = PAGES["rotated-00"].png()
    t = time.perf_counter()
    first = await http.post("/v1/ocr:extract", json={"content_base64": b64(data)})
    first_s = time.perf_counter() - t
    assert first.status_code == 200, first.text
    page = first.json()["pages"][0]
    assert not page["cached"] and page["image_width"] == PAGES["rotated-00"].image.width
    assert sum(len(ln["words"]) for ln in page["lines"]) > 40 and all(len(ln["image_box"]) == 4 for ln in page["lines"])
    t = time.perf_counter()
    again = await http.post("/v1/ocr:extract", json={"content_base64": b64(data)})
    again_s = time.perf_counter() - t
    assert again.status_code == 200 and again.json()["pages"][0]["cached"]
    assert again.json()["text"] == first.json()["text"] and again_s < first_s / 5, (first_s, again_s)
    other = await http.post("/v1/ocr:extract", json={"content_base64": b64(data), "deskew": False})
    assert not other.json()["pages"][0]["cached"]  # other options: another key


async def test_extract_bad_input_is_4xx(mesh):
    http, _, _ = mesh
    truncated = PAGES["clean-00"].png()[:3000]
    r = await http.post("/v1/ocr:extract", json={"content_base64": b64(truncated)})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "content_base64", r.text
    r = await http.post("/v1/ocr:extract", json={"content_base64": "***"})
    assert r.status_code == 400
    r = await http.post("/v1/ocr:extract", json={"content_base64": "A" * 4_100_000})
    assert r.status_code == 413


async def test_the_cache_fails_open_when_redis_is_unreachable(caplog):
    import redis.asyncio as aioredis

    client = aioredis.from_url("redis://127.0.0.1:9/0", socket_timeout=0.2, socket_connect_timeout=0.2)
    cache = OcrCache(client, ttl_s=60, timeout_s=0.3, revision="test")
    key = cache.key(b"bytes", ExtractOptions())
    caplog.set_level(logging.WARNING)
    assert await cache.get(key) is None
    await cache.put(key, [])  # no error raised
    assert "OCR cache read failed" in caplog.text
    await client.aclose()


async def test_a_masking_job_boxes_the_personal_data_and_renders_the_masked_page(mesh, caplog):
    http, _, _ = mesh
    caplog.set_level(logging.DEBUG)
    page = PAGES["clean-00"]
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(page.png())}],
                                                  "masked_png": True})
    assert r.status_code == 202, r.text
    assert r.headers["Location"] == f"/v1/masking/jobs/{r.json()['id']}"
    job = await job_finished(http, r.headers["Location"], timeout_s=60)
    assert job["state"] == "succeeded", job
    result = job["result"]["pages"][0]
    found = result["entities"]
    assert result["png_url"] == f"/v1/masking/jobs/{job['id']}/pages/0.png"
    hits = [e for e in page.entities if any(iou(f["box"], e.box) >= 0.5 for f in found)]
    assert len(hits) >= 0.8 * len(page.entities), (len(hits), len(page.entities))
    shot = await http.get(result["png_url"])
    assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"
    masked = Image.open(io.BytesIO(shot.content)).convert("L")
    assert masked.size == page.image.size
    for f in found:  # the middle of every masked box is black
        x, y, w, h = f["masked"][0]
        assert masked.getpixel((x + w // 2, y + h // 2)) == 0
    # Neither the text read nor what was found reaches a log line.
    assert all(e.text not in caplog.text for e in page.entities if len(e.text) > 3)


async def test_keep_masks_only_what_the_policy_hides(mesh):
    http, _, _ = mesh
    page = PAGES["clean-00"]
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(page.png())}],
                                                  "kinds": ["phone"], "keep": True})
    job = await job_finished(http, r.headers["Location"], timeout_s=60)
    found = job["result"]["pages"][0]["entities"]
    assert found and {f["kind"] for f in found} == {"phone"} and job["result"]["pages"][0]["png_url"] is None
    assert job["result"]["pages"][0]["cached"]  # read by the earlier job: from the OCR cache
    starting_with_digits = [f for f in found if f["text"][:3].isdigit()]
    assert starting_with_digits
    for f in starting_with_digits:  # the first three digits stay readable: the masked part starts right of them
        assert f["masked"][0][0] > f["box"][0] + 20
    png404 = await http.get(f"/v1/masking/jobs/{job['id']}/pages/0.png")
    assert png404.status_code == 404


async def test_masking_bad_input_is_4xx(mesh):
    http, _, _ = mesh
    ok = b64(PAGES["clean-00"].png())
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": ok}], "kinds": ["shoe_size"]})
    assert r.status_code == 400 and "kinds" in r.json()["error"]["fields"][0]["field"], r.text
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(b"")}]})
    assert r.status_code == 400
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": ok[:4000]}]})
    assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "documents[0]", r.text
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": "A" * 8_100_000}]})
    assert r.status_code == 413
    r = await http.get("/v1/masking/jobs/" + "0" * 32)
    assert r.status_code == 404
    r = await http.get("/v1/masking/jobs/not-a-job/pages/0.png")
    assert r.status_code == 404
    ocr_job = await http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": ok}]})
    done = await job_finished(http, f"/v1/ocr/jobs/{ocr_job.json()['id']}", timeout_s=60)
    r = await http.get(f"/v1/masking/jobs/{done['id']}")
    assert r.status_code == 400 and "OCR job" in r.json()["error"]["message"]


async def test_a_masking_job_survives_its_service_restarting_mid_job(redis_url):
    db = redis_url.rsplit("/", 1)[0] + "/7"
    pages = [PAGES["clean-00"].png(), PAGES["rotated-00"].png(), png(PAGES["clean-00"].image.rotate(1.0))]
    async with running_ocr(engines=1, redis_url=db, job_workers=1, job_lease_s=1.0, ocr_cache_ttl_s=0) as first:
        await first.jobs.redis.flushdb()
        job = await first.jobs.submit(pages, ExtractOptions(), {"kinds": [], "threshold": 0.5, "keep": False,
                                                                "company_lines": False, "masked_png": True})
        for _ in range(300):
            if (await first.jobs.status(job["job_id"]))["pages_done"] >= 1:
                break
            await asyncio.sleep(0.05)
    # The first instance stopped with the job unfinished; a new one takes it over once the lease lapses.
    async with running_ocr(engines=1, redis_url=db, job_workers=1, job_lease_s=1.0, ocr_cache_ttl_s=0) as second:
        for _ in range(600):
            status = await second.jobs.status(job["job_id"])
            if status["state"] in ("SUCCEEDED", "FAILED"):
                break
            await asyncio.sleep(0.1)
        assert status["state"] == "SUCCEEDED" and status["pages_done"] == 3, status
        _, result = await second.jobs.masking_result(job["job_id"])
        assert [p["index"] for p in result] == [0, 1, 2] and all(p["entities"] for p in result)
        for i in range(3):
            assert (await second.jobs.masked_page(job["job_id"], i)).startswith(b"\x89PNG")


def with_header(page: Image.Image, picture: Image.Image, at: tuple[int, int]) -> Image.Image:
    """The page under a 300-pixel header band holding ``picture`` at ``at`` (as a résumé's ID photo sits)."""
    out = Image.new("RGB", (page.width, page.height + 300), (255, 255, 255))
    out.paste(page.convert("RGB"), (0, 300))
    out.paste(picture, at)
    return out


def id_photo(seed: int = 3) -> Image.Image:
    """A photograph-like picture made here: a smooth random field of many tones, 180 x 240."""
    import numpy as np

    rng = np.random.default_rng(seed)
    grey = rng.normal(0, 1, (16, 12, 1))
    field = (grey - grey.min()) / (grey.max() - grey.min()) * 235 + 10 + rng.normal(0, 8, (16, 12, 3))
    return Image.fromarray(field.clip(0, 255).astype("uint8")).resize((180, 240), Image.Resampling.BICUBIC)


def bar_chart() -> Image.Image:
    """A skills chart: axes and four solid bars on white (ink on paper, not a photograph)."""
    from PIL import ImageDraw

    chart = Image.new("RGB", (260, 170), (255, 255, 255))
    draw = ImageDraw.Draw(chart)
    draw.line((20, 150, 250, 150), fill=(0, 0, 0), width=2)
    draw.line((20, 10, 20, 150), fill=(0, 0, 0), width=2)
    for k, height in enumerate((120, 80, 100, 50)):
        draw.rectangle((40 + 52 * k, 150 - height, 70 + 52 * k, 149), fill=(31, 119, 180))
    return chart


async def test_an_id_photo_is_masked_whole_and_a_chart_is_not(mesh):
    http, _, _ = mesh
    page = with_header(PAGES["clean-00"].image, id_photo(), (980, 30))
    page.paste(bar_chart(), (80, 60))
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(png(page))}],
                                                  "masked_png": True})
    job = await job_finished(http, r.headers["Location"], timeout_s=60)
    result = job["result"]["pages"][0]
    photos = [p for p in result["pictures"] if p["kind"] == "photo"]
    assert len(result["pictures"]) == 1 and len(photos) == 1, result["pictures"]
    x, y, w, h = photos[0]["box"]
    assert x <= 985 and y <= 35 and x + w >= 1155 and y + h >= 265, photos[0]["box"]  # the whole photo
    masked = Image.open(io.BytesIO((await http.get(result["png_url"])).content)).convert("L")
    assert masked.getpixel((1070, 150)) == 0 and masked.getpixel((150, 140)) != 0  # photo black, chart kept
    r = await http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(png(page))}],
                                                  "pictures": False})
    job = await job_finished(http, r.headers["Location"], timeout_s=60)
    assert job["result"]["pages"][0]["pictures"] == []
