"""Multi-page jobs with their whole state in Redis, so a job survives the process that took it.

Keys (every one expires with the job's TTL):
- ``ocr:job:{id}`` hash: state, progress, error, timestamps, options;
- ``ocr:job:{id}:input`` list: the uploads, in order;
- ``ocr:job:{id}:pages`` hash: page index -> JSON result (a re-run skips pages already read);
- ``ocr:queue`` list of job ids; a worker moves an id to ``ocr:running:{instance}`` while it works;
- ``ocr:instance:{instance}``: a heartbeat; when it lapses, any instance's reaper puts that
  instance's running jobs back on the queue (crash recovery).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from dataclasses import asdict
from typing import Any, cast

import redis.asyncio as aioredis
from opentelemetry import propagate, trace
from redis.exceptions import RedisError

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

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.ocr")
QUEUE = "ocr:queue"
JOB_ID = re.compile(r"[0-9a-f]{32}")
HEARTBEAT_S = 5
LEASE_S = 15


def page_to_json(page: PageResult) -> str:
    """Serialise a page result."""
    return json.dumps(asdict(page), ensure_ascii=False)


def page_from_json(raw: str | bytes) -> PageResult:
    """Parse a page result."""
    data = json.loads(raw)
    data["lines"] = [Line(ln["text"], ln["confidence"], tuple(ln["box"])) for ln in data["lines"]]
    data["ocr_size"] = tuple(data["ocr_size"])
    return PageResult(**data)


def _trace_carrier() -> dict[str, str]:
    """The current trace context as W3C headers (stored with a job, so its run links back to the request)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def _now_ms() -> int:
    return int(time.time() * 1000)


class JobStore:
    """Submit/status/result over Redis, and this instance's workers."""

    def __init__(self, extractor: Extractor, redis_url: str, *, ttl_s: int, max_queued: int, max_pages: int,
                 workers: int, timeout_s: float = 2.0, max_store_bytes: int = 256 * 1024 * 1024) -> None:
        self.extractor = extractor
        self.ttl_s = ttl_s
        self.max_queued = max_queued
        self.max_pages = max_pages
        self.max_store_bytes = max_store_bytes
        self.workers = workers
        self.instance = uuid.uuid4().hex[:12]
        self.redis = aioredis.from_url(redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        # Blocking pops get their own connection without a socket timeout shorter than the block.
        self._blocking = aioredis.from_url(redis_url, socket_timeout=None, socket_connect_timeout=timeout_s)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._monitor: DependencyMonitor | None = None

    def watch_redis(self, monitor: DependencyMonitor) -> None:
        """Let workers wait for the monitor to see Redis back instead of retrying (and logging) on a timer."""
        self._monitor = monitor

    async def ping(self) -> None:
        """Return when Redis answers (the health monitor's probe for the jobs capability)."""
        await self.redis.ping()

    async def _redis_back(self) -> None:
        await asyncio.sleep(0.5)  # never a hot loop, whatever the error was
        if self._monitor is None:
            return
        self._monitor.recheck()
        try:  # bounded, so a stop request is noticed
            await asyncio.wait_for(self._monitor.wait_up("redis"), 5.0)
        except TimeoutError:
            pass

    @staticmethod
    def _key(job_id: str, part: str = "") -> str:
        return f"ocr:job:{job_id}" + (f":{part}" if part else "")

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
        job_id = uuid.uuid4().hex
        now = _now_ms()
        state: dict[str, str | int] = {
            "job_id": job_id, "state": "QUEUED", "pages_total": pages, "pages_done": 0, "error": "",
            "created_unix_ms": now, "updated_unix_ms": now, "expires_unix_ms": now + self.ttl_s * 1000,
            "options": json.dumps(asdict(options)), "trace": json.dumps(_trace_carrier())}
        try:
            if await self.redis.llen(QUEUE) >= self.max_queued:
                raise Overloaded(f"{self.max_queued} jobs already queued", retry_after_s=5.0)
            # Uploads wait in Redis until read: bound what they may take in total (Redis runs without
            # eviction, so an unbounded queue would end in every write failing).
            used = int((await self.redis.info("memory")).get("used_memory", 0))
            size = sum(len(c) for c in contents)
            if used + size > self.max_store_bytes:
                raise Overloaded(f"the job store holds {used // 2**20} MiB; {size // 2**20} MiB more would pass "
                                 f"its {self.max_store_bytes // 2**20} MiB limit (--max-store-bytes)",
                                 retry_after_s=30.0)
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(self._key(job_id), mapping=cast(Any, state))
                pipe.rpush(self._key(job_id, "input"), *contents)
                pipe.expire(self._key(job_id), self.ttl_s)
                pipe.expire(self._key(job_id, "input"), self.ttl_s)
                pipe.rpush(QUEUE, job_id)
                await pipe.execute()
        except RedisError as err:
            raise DependencyUnavailable(f"job store unavailable: {err}") from None
        return self._public(state)

    @staticmethod
    def _public(raw: dict) -> dict:
        out = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
               for k, v in raw.items()}
        for k in ("pages_total", "pages_done", "created_unix_ms", "updated_unix_ms", "expires_unix_ms"):
            out[k] = int(out.get(k, 0))
        out.pop("options", None)
        out.pop("trace", None)
        return out

    async def status(self, job_id: str) -> dict:
        """A job's state; NOT_FOUND when unknown or expired."""
        if not job_id:
            raise InvalidInput("job_id is required", [Violation("job_id", "required")])
        if not JOB_ID.fullmatch(job_id):  # ids are uuid4 hex: nothing else may become part of a Redis key
            raise NotFound("no such job (job ids are 32 hexadecimal characters)")
        try:
            raw = await self.redis.hgetall(self._key(job_id))
        except RedisError as err:
            raise DependencyUnavailable(f"job store unavailable: {err}") from None
        if not raw:
            raise NotFound(f"job {job_id!r} is unknown or expired")
        return self._public(raw)

    async def result(self, job_id: str) -> tuple[dict, list[PageResult]]:
        """A finished job's pages in order; FAILED_PRECONDITION until it succeeded."""
        job = await self.status(job_id)
        if job["state"] != "SUCCEEDED":
            detail = f": {job['error']}" if job["error"] else ""
            raise FailedPrecondition(f"job {job_id} is {job['state']}{detail}")
        try:
            raw = await self.redis.hgetall(self._key(job_id, "pages"))
        except RedisError as err:
            raise DependencyUnavailable(f"job store unavailable: {err}") from None
        pages = sorted((page_from_json(v) for v in raw.values()), key=lambda p: p.index)
        return job, pages

    # -- workers -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start heartbeat, reaper and ``workers`` job loops (no-op with zero workers)."""
        if self.workers == 0:
            return
        self._tasks.append(asyncio.create_task(self._heartbeat()))
        self._tasks += [asyncio.create_task(self._work_loop()) for _ in range(self.workers)]

    async def _heartbeat(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.redis.set(f"ocr:instance:{self.instance}", "1", ex=LEASE_S)
                await self.requeue_orphans()
            except RedisError as err:  # the health monitor reports Redis down once, not every beat
                log.debug("heartbeat failed: %s", err)
            try:
                await asyncio.wait_for(self._stopping.wait(), HEARTBEAT_S)
            except TimeoutError:
                pass

    async def requeue_orphans(self) -> int:
        """Put jobs held by instances whose heartbeat lapsed back on the queue; returns how many."""
        moved = 0
        async for key in self.redis.scan_iter(match="ocr:running:*"):
            owner = (key.decode() if isinstance(key, bytes) else key).rsplit(":", 1)[-1]
            if owner == self.instance or await self.redis.exists(f"ocr:instance:{owner}"):
                continue
            while await self.redis.lmove(key, QUEUE, "RIGHT", "LEFT") is not None:
                moved += 1
        if moved:
            log.warning("requeued %d job(s) of lapsed instances", moved)
        return moved

    async def _work_loop(self) -> None:
        running = f"ocr:running:{self.instance}"
        while not self._stopping.is_set():
            try:
                raw = await self._blocking.blmove(QUEUE, running, 1, "LEFT", "RIGHT")
            except RedisError as err:
                log.debug("queue unavailable: %s", err)
                await self._redis_back()
                continue
            if raw is None:
                continue
            job_id = raw.decode() if isinstance(raw, bytes) else raw
            try:
                await self.run_job(job_id)
                await self.redis.lrem(running, 1, job_id)
            except RedisError as err:  # leave it on the running list: the reaper or a restart requeues it
                log.warning("job %s interrupted by Redis: %s", job_id, err)
                await self._redis_back()

    async def run_job(self, job_id: str) -> None:
        """Read every page not yet read; record progress; mark the job finished."""
        key = self._key(job_id)
        meta = await self.redis.hgetall(key)
        if not meta:
            return  # expired before a worker got to it
        options = ExtractOptions(**json.loads(meta[b"options"]))
        # The job runs later, maybe elsewhere: its own trace, linked to the request that submitted it.
        submitted = trace.get_current_span(propagate.extract(json.loads(meta.get(b"trace") or b"{}")))
        links = [trace.Link(submitted.get_span_context())] if submitted.get_span_context().is_valid else []
        with TRACER.start_as_current_span("ocr.job", links=links, attributes={"mesh.ocr.job_id": job_id}):
            await self._run_job(job_id, key, meta, options)

    async def _run_job(self, job_id: str, key: str, meta: dict, options: ExtractOptions) -> None:
        pages_key = self._key(job_id, "pages")
        await self.redis.hset(key, mapping={"state": "RUNNING", "updated_unix_ms": _now_ms()})
        done = {int(k) for k in await self.redis.hkeys(pages_key)}
        index = 0
        try:
            for i, data in enumerate(await self.redis.lrange(self._key(job_id, "input"), 0, -1)):
                images = await self.extractor.decode(data if isinstance(data, bytes) else data.encode(),
                                                     f"contents[{i}]")
                base = index
                todo = [(base + k, image) for k, image in enumerate(images) if base + k not in done]
                # Pages are read a window at a time, one per engine, so a multi-page job uses every core;
                # results are stored by page index, so the order they finish in does not matter.
                window = max(1, self.extractor.pool.size)
                for start in range(0, len(todo), window):
                    chunk = todo[start:start + window]
                    index = chunk[0][0]  # named in the error if this window fails (its first page)
                    pages = await asyncio.gather(*(self._read_with_retry(i, img, options) for i, img in chunk))
                    async with self.redis.pipeline(transaction=True) as pipe:
                        for page in pages:
                            pipe.hset(pages_key, str(page.index), page_to_json(page))
                        pipe.expire(pages_key, self.ttl_s)
                        pipe.hincrby(key, "pages_done", len(pages))
                        pipe.hset(key, "updated_unix_ms", _now_ms())
                        await pipe.execute()
                index = base + len(images)
        except MeshError as err:
            await self.redis.hset(key, mapping={"state": "FAILED", "error": f"page {index}: {err.message}",
                                                "updated_unix_ms": _now_ms()})
            await self.redis.delete(self._key(job_id, "input"))  # a failed job's uploads are never read again
            return
        await self.redis.hset(key, mapping={"state": "SUCCEEDED", "updated_unix_ms": _now_ms()})
        await self.redis.delete(self._key(job_id, "input"))

    async def _read_with_retry(self, index: int, image, options: ExtractOptions) -> PageResult:
        while True:
            try:
                return await self.extractor.read_page(index, image, options)
            except Overloaded as err:  # Extract calls hold the engines; wait our turn
                await asyncio.sleep(err.retry_after_s)

    async def close(self) -> None:
        """Stop workers (a job in progress stays on the running list and is requeued later)."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self.redis.delete(f"ocr:instance:{self.instance}")
        except RedisError:
            pass
        await self.redis.aclose()
        await self._blocking.aclose()
