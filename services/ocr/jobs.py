"""Multi-page OCR jobs on the shared job store (services/runtime/jobs), whole state in Redis.

Queueing, leases (heartbeat), the requeue of a dead instance's jobs, TTL, progress and state come
from :class:`~services.runtime.jobs.redis.RedisJobs` under the namespace ``ocr``; this module keeps what
is OCR's: validating uploads, bounding what they may take in Redis (``--max-store-bytes``), reading
pages a window at a time, and the per-page results, so a resumed job skips pages already read.

Keys (prefix ``jobs:{ocr}``; the store's module lists the rest; each expires ``--job-ttl-s`` after the
job's last change):
- ``jobs:{ocr}:job:{id}``: the shared job record (JSON: state, progress, errors, timestamps; ``meta``
  holds the options and the submitter's trace context);
- ``jobs:{ocr}:job:{id}:input``: the uploads, in order, length-prefixed in one value;
- ``jobs:{ocr}:job:{id}:pages`` hash: page index -> JSON result (OCR jobs);
- ``jobs:{ocr}:job:{id}:masked`` hash: page index -> JSON findings with boxes (masking jobs);
- ``jobs:{ocr}:job:{id}:png`` hash: page index -> the masked page as PNG (masking jobs that asked).

Masking jobs (kind ``mask``) read their pages the same way, then run the personal-data detector on
each page's words (:mod:`services.ocr.masking`). Both kinds take an upload's pages from the OCR cache
(:mod:`services.ocr.cache`) when it holds them, and put them there once read.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

from opentelemetry import trace
from PIL import Image

from services.bootstrap.errors import (
    DependencyUnavailable,
    FailedPrecondition,
    InvalidInput,
    MeshError,
    NotFound,
    Overloaded,
    Violation,
)
from services.bootstrap.health import DependencyMonitor
from services.ocr.cache import OcrCache
from services.ocr.extractor import ExtractOptions, Extractor, PageResult
from services.ocr.filereader import layer_pages
from services.ocr.files import read_pdf
from services.ocr.imaging import is_pdf
from services.ocr.masking import FIT_MAX_SKEW, Located, fitted, locate, masked_png, merged
from services.ocr.pictures import find as find_pictures
from services.ocr.pii.detector import Policy
from services.ocr.rereads import reread
from services.ocr.results import page_from_json, page_to_json
from services.ocr.sandbox import ReadingProcesses
from services.runtime.jobs import (
    JOB_ID,
    JobContext,
    JobNotFound,
    JobRecord,
    JobStoreUnavailable,
    QueueFull,
)
from services.runtime.jobs.redis import RedisJobs

KIND = "ocr"  # the job kind, so the run's span is ``ocr.job``
MASK = "mask"  # a masking job (span ``mask.job``)
PAGES = "pages"
MASKED = "masked"
PNG = "png"
_LENGTH = struct.Struct(">Q")
_PUBLIC_INTS = ("pages_total", "pages_done", "created_unix_ms", "updated_unix_ms", "expires_unix_ms")


def pack_uploads(contents: list[bytes]) -> bytes:
    """The uploads as one job input: each one length-prefixed, in order."""
    return b"".join(_LENGTH.pack(len(c)) + c for c in contents)


def unpack_uploads(payload: bytes) -> Iterator[bytes]:
    """The uploads of a job input, in order."""
    view, at = memoryview(payload), 0
    while at < len(view):
        (size,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        yield bytes(view[at:at + size])
        at += size


class JobStore:
    """Submit/status/result of OCR jobs, and this instance's page-reading workers, over the shared store."""

    def __init__(self, extractor: Extractor, redis_url: str, *, ttl_s: int, max_queued: int, max_pages: int,
                 workers: int, timeout_s: float = 2.0, max_store_bytes: int = 256 * 1024 * 1024,
                 lease_s: float = 15.0, tracer_provider: trace.TracerProvider | None = None,
                 cache_ttl_s: int = 0, cache_revision: str = "", cache_redis_url: str = "",
                 png_bytes_per_page: int = 1024 * 1024, png_ttl_s: int = 3600, mask_margin_px: int = 2,
                 fit_masks: bool = True, reread_labels: bool = True,
                 readings: ReadingProcesses | None = None) -> None:
        self.extractor = extractor
        self.readings = readings or ReadingProcesses()  # PDF text layers, read under the file work budget
        self.reread_labels = reread_labels
        self.mask_margin_px = mask_margin_px
        self.fit_masks = fit_masks
        self.ttl_s = ttl_s
        self.max_pages = max_pages
        self.max_store_bytes = max_store_bytes
        self.png_bytes_per_page = png_bytes_per_page  # a masked PNG, counted at admission
        self.store = RedisJobs({KIND: self._read_pages, MASK: self._mask_pages}, redis_url, "ocr", lease_s=lease_s,
                               timeout_s=timeout_s, ttl_s=ttl_s, max_queued=max_queued, workers=workers,
                               parts=(PAGES, MASKED, PNG), part_ttl_s={PNG: min(png_ttl_s, ttl_s)},
                               tracer_provider=tracer_provider)
        # The OCR cache on its own (evicting) Redis, else the job store's; 0 turns it off (--ocr-cache-ttl-s).
        self._cache_redis: Any = None
        if cache_redis_url and cache_ttl_s > 0:
            import redis.asyncio as aioredis

            self._cache_redis = aioredis.from_url(cache_redis_url, socket_timeout=timeout_s,
                                                  socket_connect_timeout=timeout_s)
        self.cache = OcrCache(self._cache_redis or self.store.redis, ttl_s=cache_ttl_s, timeout_s=timeout_s,
                              revision=cache_revision) if cache_ttl_s > 0 else None

    @property
    def redis(self) -> Any:
        """The store's Redis connection."""
        return self.store.redis

    def watch_redis(self, monitor: DependencyMonitor) -> None:
        """Let workers wait for the monitor to see Redis back instead of retrying (and logging) on a timer."""
        self.store.watch_store(monitor, "redis")

    async def ping(self) -> None:
        """Return when Redis answers (the health monitor's probe for the jobs capability)."""
        await self.store.ping()

    async def start(self) -> None:
        """Start the lease, the reaper and ``workers`` job loops."""
        await self.store.start()

    async def close(self) -> None:
        """Stop workers (a job in progress is requeued by the next instance whose reaper runs)."""
        await self.store.close()
        if self._cache_redis is not None:
            await self._cache_redis.aclose()

    async def submit(self, contents: list[bytes], options: ExtractOptions, masking: dict | None = None) -> dict:
        """Validate every upload (decoding it), store the job, queue it; returns its state.

        ``masking`` (the policy's fields and ``masked_png``) makes it a masking job.
        """
        if not contents:
            raise InvalidInput("no uploads", [Violation("contents", "give at least one image or PDF")])
        if options.languages:
            self.extractor.check_languages(options.languages)
        pages = 0
        for i, data in enumerate(contents):
            pages += await self.extractor.count(data, f"contents[{i}]")
            if pages > self.max_pages:
                raise InvalidInput(f"over {self.max_pages} pages",
                                   [Violation("contents", f"at most {self.max_pages} pages")])
        try:
            # Uploads wait in Redis until read: bound what they may take in total (Redis runs without
            # eviction, so an unbounded queue would end in every write failing).
            # A masking job asking for PNGs stores one per page later: counted now, so the store does not fill
            # half-way through the job.
            used = await self.store.used_bytes()
            pngs = pages * self.png_bytes_per_page if (masking or {}).get("masked_png") else 0
            size = sum(len(c) for c in contents) + pngs
            if used + size > self.max_store_bytes:
                raise Overloaded(f"the job store holds {used // 2**20} MiB; {size / 2**20:.1f} MiB more (uploads"
                                 + (f" and {pages} masked PNGs" if pngs else "") + ") would pass its "
                                 f"{self.max_store_bytes // 2**20} MiB limit (--max-store-bytes)", retry_after_s=30.0)
            meta: dict[str, Any] = {"options": asdict(options)}
            if masking is not None:
                meta["masking"] = masking
            record = await self.store.submit(KIND if masking is None else MASK, "", pack_uploads(contents),
                                             total=pages, meta=meta)
        except QueueFull as err:
            raise Overloaded(str(err), retry_after_s=5.0) from None
        except JobStoreUnavailable as err:
            raise DependencyUnavailable(str(err)) from None
        return self._view(record)

    def _view(self, r: JobRecord) -> dict:
        # Every save refreshes the job's keys, so it is forgotten ttl_s after its last change.
        return self._public({"job_id": r.id, "state": r.state.upper(), "pages_total": r.total, "pages_done": r.done,
                             "error": "; ".join(r.errors), "created_unix_ms": r.created_unix_ms,
                             "updated_unix_ms": r.updated_unix_ms,
                             "expires_unix_ms": r.updated_unix_ms + self.ttl_s * 1000})

    @staticmethod
    def _public(raw: dict) -> dict:
        """The public job fields (text, numbers as ints), nothing internal (options, trace)."""
        out = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
               for k, v in raw.items()}
        for k in _PUBLIC_INTS:
            out[k] = int(out.get(k, 0))
        for k in ("options", "trace", "meta"):
            out.pop(k, None)
        return out

    async def status(self, job_id: str) -> dict:
        """A job's state; NOT_FOUND when unknown or expired."""
        return self._view(await self._record(job_id))

    async def _record(self, job_id: str) -> JobRecord:
        if not job_id:
            raise InvalidInput("job_id is required", [Violation("job_id", "required")])
        if not JOB_ID.fullmatch(job_id):  # ids are uuid4 hex: nothing else may become part of a Redis key
            raise NotFound("no such job (job ids are 32 hexadecimal characters)")
        try:
            record = await self.store.get(job_id)
        except JobNotFound:
            raise NotFound(f"job {job_id!r} is unknown or expired") from None
        except JobStoreUnavailable as err:
            raise DependencyUnavailable(str(err)) from None
        return record

    async def _finished(self, job_id: str, kind: str) -> dict:
        record = await self._record(job_id)
        if record.kind != kind:
            other = "a masking job: use GetMaskingResult" if record.kind == MASK else "an OCR job: use GetJobResult"
            raise InvalidInput(f"job {job_id} is {other}", [Violation("job_id", other)])
        job = self._view(record)
        if job["state"] != "SUCCEEDED":
            detail = f": {job['error']}" if job["error"] else ""
            raise FailedPrecondition(f"job {job_id} is {job['state']}{detail}")
        return job

    async def _part(self, job_id: str, part: str) -> dict[str, bytes]:
        try:
            return await self.store.read_part(job_id, part)
        except JobStoreUnavailable as err:
            raise DependencyUnavailable(str(err)) from None

    async def result(self, job_id: str) -> tuple[dict, list[PageResult]]:
        """A finished OCR job's pages in order; FAILED_PRECONDITION until it succeeded."""
        job = await self._finished(job_id, KIND)
        pages = sorted((page_from_json(v) for v in (await self._part(job_id, PAGES)).values()), key=lambda p: p.index)
        return job, pages

    async def masking_result(self, job_id: str) -> tuple[dict, list[dict]]:
        """A finished masking job's pages (findings with boxes) in order."""
        job = await self._finished(job_id, MASK)
        pages = sorted((json.loads(v) for v in (await self._part(job_id, MASKED)).values()), key=lambda p: p["index"])
        return job, pages

    async def masked_page(self, job_id: str, index: int) -> bytes:
        """One masked page of a finished masking job as PNG; NOT_FOUND when the job did not render it."""
        await self._finished(job_id, MASK)
        try:
            png = await self.store.read_entry(job_id, PNG, str(index))
        except JobStoreUnavailable as err:
            raise DependencyUnavailable(str(err)) from None
        if png is None:
            raise NotFound(f"job {job_id} has no masked image of page {index} (ask for masked_png; pages "
                           "count from 0; masked images are kept --png-ttl-s after they were written)")
        return png

    # -- the job handler (runs on whichever instance took the job) -------------------------------

    async def _read_pages(self, record: JobRecord, payload: bytes, ctx: JobContext) -> None:
        """An OCR job: every page's reading stored by index."""
        async def store(pages: list[PageResult], images: dict[int, Image.Image],
                        layers: dict[int, PageResult]) -> None:
            await ctx.write_part(PAGES, {str(p.index): page_to_json(p) for p in pages})

        await self._each_page(record, payload, ctx, PAGES, store, need_images=False)

    async def _mask_pages(self, record: JobRecord, payload: bytes, ctx: JobContext) -> None:
        """A masking job: every page read, its personal data located, the masked PNG rendered if asked."""
        masking = dict(record.meta.get("masking") or {})
        png = bool(masking.pop("masked_png", False))
        with_pictures = bool(masking.pop("pictures", True))
        policy = Policy(kinds=tuple(masking.get("kinds") or ()) or Policy().kinds,
                        threshold=masking.get("threshold", Policy().threshold),
                        company_lines=bool(masking.get("company_lines")), keep=bool(masking.get("keep")))

        def work(page: PageResult, image: Image.Image | None,
                 layer: PageResult | None) -> tuple[dict, bytes | None]:
            t = time.perf_counter_ns()
            found = locate(page, policy)
            if layer is not None:  # a scan under a text layer: what either reading found is masked
                found = merged(found, locate(layer, policy))
            if self.reread_labels and image is not None and page.lines:
                found += reread(page, image, found, self.extractor.pool, policy)
            # A turned page keeps OCR's boxes: its ink does not lie in upright rows.
            if self.fit_masks and image is not None and abs(page.skew_degrees) < FIT_MAX_SKEW:
                found = fitted(image, found, grow=not policy.keep)
            shown = pictures_on(image) if with_pictures and image is not None else []
            rendered = masked_png(image, found + shown, self.mask_margin_px) if png and image is not None else None
            took = page.timings.get("total_ns", 0) * (not page.cached) + time.perf_counter_ns() - t
            return masked_view(page, found, rendered is not None, took, shown), rendered

        async def store(pages: list[PageResult], images: dict[int, Image.Image],
                        layers: dict[int, PageResult]) -> None:
            done = await asyncio.gather(*(asyncio.to_thread(work, p, images.get(p.index), layers.get(p.index))
                                          for p in pages))
            await ctx.write_part(MASKED, {str(p.index): json.dumps(view, ensure_ascii=False)
                                          for p, (view, _) in zip(pages, done, strict=True)})
            await ctx.write_part(PNG, {str(p.index): image for p, (_, image) in zip(pages, done, strict=True)
                                       if image is not None})

        # Images always: boxes are fitted to the ink, and photos found by their pixels.
        await self._each_page(record, payload, ctx, MASKED, store, need_images=True)

    async def _each_page(self, record: JobRecord, payload: bytes, ctx: JobContext, part: str,
                         store: Callable[[list[PageResult], dict[int, Image.Image], dict[int, PageResult]],
                                         Awaitable[None]],
                         need_images: bool) -> None:
        """Read every page not yet stored in ``part`` (a resumed job skips the rest), a window at a time.

        An upload's pages come from the OCR cache when it holds them (decoded only if ``need_images``);
        an upload read whole is put there. A page that fails ends the job, naming the page.
        """
        options = ExtractOptions(**record.meta["options"])
        done = {int(k) for k in await ctx.read_part(part)}
        index = 0
        try:
            for i, data in enumerate(unpack_uploads(payload)):
                # Masking jobs box a PDF page's personal data with its text layer's glyph boxes where usable
                # (read again each time: it is cheap, and kept out of the OCR cache); a page whose layer lies
                # over an image (a scanner's searchable PDF: its own OCR, which may misread what the image
                # shows) is read by OCR too, and what either reading finds is masked. OCR jobs are OCR
                # readings (their pages' engine is Tesseract or the VLM).
                layered = part == MASKED and is_pdf(data)
                cache = None if layered else self.cache
                key = cache.key(data, options) if cache is not None else ""
                cached = await cache.get(key) if cache is not None else None
                pdf_pages, layer, under = await self._layer(data, f"contents[{i}]") if layered else (0, {}, {})
                ocr_needed = cached is None and (not pdf_pages or len(layer) < pdf_pages)
                images = await self.extractor.decode(data, f"contents[{i}]") if ocr_needed or need_images else []
                base = index
                n = len(cached) if cached is not None else (pdf_pages or len(images))
                todo = [base + k for k in range(n) if base + k not in done]
                read: list[PageResult] = []
                # Pages are read a window at a time, one per engine, so a multi-page job uses every core;
                # results are stored by page index, so the order they finish in does not matter.
                window = max(1, self.extractor.pool.size)
                for start in range(0, len(todo), window):
                    chunk = todo[start:start + window]
                    index = chunk[0]  # named in the error if this window fails (its first page)
                    if cached is not None:
                        pages = [replace(cached[k - base], index=k) for k in chunk]
                    else:
                        pages = list(await asyncio.gather(*(
                            self._as_is(replace(layer[k - base], index=k)) if k - base in layer
                            else self._read_with_retry(k, images[k - base], options) for k in chunk)))
                        read += pages
                    await store(pages, {k: images[k - base] for k in chunk} if images else {},
                                {k: replace(under[k - base], index=k) for k in chunk if k - base in under})
                    done.update(p.index for p in pages)
                    await ctx.progress(done=len(done))
                if cache is not None and cached is None and len(read) == n:
                    await cache.put(key, [replace(p, index=p.index - base) for p in read])
                index = base + n
        except MeshError as err:
            await ctx.progress(error=f"page {index}: {err.message}")

    async def _layer(self, data: bytes, field: str) -> tuple[int, dict[int, PageResult], dict[int, PageResult]]:
        """A PDF's page count, the pages its text layer alone reads, and the usable layers that lie over an image.

        Pages of the first kind are taken from the layer — exact text, each character's box from the
        PDF. Pages of the second kind are read by OCR as well (the image is the page; the layer is only
        someone's reading of it), and the rest by OCR alone. (0, {}, {}) for an image upload.
        """
        if not is_pdf(data):
            return 0, {}, {}
        loop = asyncio.get_running_loop()
        reading = await self.readings.run(read_pdf, data, self.extractor.limits, self.extractor.limits.max_pages,
                                          field, field_name=field)
        usable = await loop.run_in_executor(self.extractor._threads, layer_pages, reading,
                                            self.extractor.plausibility)
        scanned = {p.index for p in reading.pages if p.has_image}
        return (len(reading.pages), {k: p for k, p in usable.items() if k not in scanned},
                {k: p for k, p in usable.items() if k in scanned})

    @staticmethod
    async def _as_is(page: PageResult) -> PageResult:
        return page

    async def _read_with_retry(self, index: int, image, options: ExtractOptions) -> PageResult:
        while True:
            try:
                return await self.extractor.read_page(index, image, options)
            except Overloaded as err:  # Extract calls hold the engines; wait our turn
                await asyncio.sleep(err.retry_after_s)


def masked_view(page: PageResult, found: list[Located], has_png: bool, total_ns: int,
                shown: list[Located] | None = None) -> dict:
    """A masking job's stored result of one page (``shown``: its photographs)."""
    return {"index": page.index, "image_size": list(page.image_size), "has_png": has_png, "cached": page.cached,
            "mean_confidence": page.mean_confidence, "fallback_reason": page.fallback_reason,
            "total_ns": total_ns, "entities": [asdict(f) for f in found], "pictures": [asdict(f) for f in shown or []]}


def pictures_on(image: Image.Image) -> list[Located]:
    """The page's photographs (services/ocr/pictures.py) as findings masked whole."""
    return [Located(p.kind, p.score, "pixels", "", p.box, [p.box]) for p in find_pictures(image)]
