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
- ``jobs:{ocr}:job:{id}:pages`` hash: page index -> JSON result.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from opentelemetry import trace

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
from services.ocr.engine import Line
from services.ocr.extractor import ExtractOptions, Extractor, PageResult
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
PAGES = "pages"
_LENGTH = struct.Struct(">Q")
_PUBLIC_INTS = ("pages_total", "pages_done", "created_unix_ms", "updated_unix_ms", "expires_unix_ms")


def page_to_json(page: PageResult) -> str:
    """Serialise a page result."""
    return json.dumps(asdict(page), ensure_ascii=False)


def page_from_json(raw: str | bytes) -> PageResult:
    """Parse a page result."""
    data = json.loads(raw)
    data["lines"] = [Line(ln["text"], ln["confidence"], tuple(ln["box"])) for ln in data["lines"]]
    data["ocr_size"] = tuple(data["ocr_size"])
    return PageResult(**data)


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
                 lease_s: float = 15.0, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.extractor = extractor
        self.ttl_s = ttl_s
        self.max_pages = max_pages
        self.max_store_bytes = max_store_bytes
        self.store = RedisJobs({KIND: self._read_pages}, redis_url, "ocr", lease_s=lease_s, timeout_s=timeout_s,
                               ttl_s=ttl_s, max_queued=max_queued, workers=workers, parts=(PAGES,),
                               tracer_provider=tracer_provider)

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

    async def submit(self, contents: list[bytes], options: ExtractOptions) -> dict:
        """Validate every upload (decoding it), store the job, queue it; returns its state."""
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
            used = await self.store.used_bytes()
            size = sum(len(c) for c in contents)
            if used + size > self.max_store_bytes:
                raise Overloaded(f"the job store holds {used // 2**20} MiB; {size // 2**20} MiB more would pass "
                                 f"its {self.max_store_bytes // 2**20} MiB limit (--max-store-bytes)",
                                 retry_after_s=30.0)
            record = await self.store.submit(KIND, "", pack_uploads(contents), total=pages,
                                             meta={"options": asdict(options)})
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

    async def result(self, job_id: str) -> tuple[dict, list[PageResult]]:
        """A finished job's pages in order; FAILED_PRECONDITION until it succeeded."""
        job = await self.status(job_id)
        if job["state"] != "SUCCEEDED":
            detail = f": {job['error']}" if job["error"] else ""
            raise FailedPrecondition(f"job {job_id} is {job['state']}{detail}")
        try:
            raw = await self.store.read_part(job_id, PAGES)
        except JobStoreUnavailable as err:
            raise DependencyUnavailable(str(err)) from None
        pages = sorted((page_from_json(v) for v in raw.values()), key=lambda p: p.index)
        return job, pages

    # -- the job handler (runs on whichever instance took the job) -------------------------------

    async def _read_pages(self, record: JobRecord, payload: bytes, ctx: JobContext) -> None:
        """Read every page not yet read (a resumed job skips the rest); a page that fails ends the job."""
        options = ExtractOptions(**record.meta["options"])
        done = {int(k) for k in await ctx.read_part(PAGES)}
        index = 0
        try:
            for i, data in enumerate(unpack_uploads(payload)):
                images = await self.extractor.decode(data, f"contents[{i}]")
                base = index
                todo = [(base + k, image) for k, image in enumerate(images) if base + k not in done]
                # Pages are read a window at a time, one per engine, so a multi-page job uses every core;
                # results are stored by page index, so the order they finish in does not matter.
                window = max(1, self.extractor.pool.size)
                for start in range(0, len(todo), window):
                    chunk = todo[start:start + window]
                    index = chunk[0][0]  # named in the error if this window fails (its first page)
                    pages = await asyncio.gather(*(self._read_with_retry(i, img, options) for i, img in chunk))
                    await ctx.write_part(PAGES, {str(p.index): page_to_json(p) for p in pages})
                    done.update(p.index for p in pages)
                    await ctx.progress(done=len(done))
                index = base + len(images)
        except MeshError as err:
            await ctx.progress(error=f"page {index}: {err.message}")

    async def _read_with_retry(self, index: int, image, options: ExtractOptions) -> PageResult:
        while True:
            try:
                return await self.extractor.read_page(index, image, options)
            except Overloaded as err:  # Extract calls hold the engines; wait our turn
                await asyncio.sleep(err.retry_after_s)
