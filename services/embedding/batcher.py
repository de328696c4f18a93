"""Micro-batcher: requests queue, a batch forms by size or short delay, one inference at a time.

A bounded queue answers :class:`Overloaded` at once (with an estimate of when to retry) instead of
letting latency grow without limit. Inference runs on a dedicated thread; the event loop only
moves futures. Requests whose deadline passed or whose caller left are dropped before inference.
A batch also holds at most ``max_batch_tokens`` tokens, so a big request of long passages runs as
several batches and one whose caller gave up stops after the batch in progress, instead of holding
the engine (and every query queued behind it) for the whole request: 16 passages of 512 tokens
kept it busy 13 s after their caller's 1.5 s deadline when a batch was counted in texts only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram

from services.bootstrap.errors import DeadlineExceeded, Overloaded
from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.tokenizer import EncodedText, TokenBatch

log = logging.getLogger(__name__)


# Padded tokens (rows x width) one forward pass may hold. Activations grow with it (attention with
# its square), so it bounds peak memory: 64 texts of 512 tokens in one pass took the process from
# ~0.6 to ~3.4 GB; in passes of 4096 tokens the peak is ~0.3 GB over the warm baseline, and long
# passages run no slower in smaller passes.
MAX_PASS_TOKENS = 4096
# After a batch whose largest pass held this many padded tokens, the engine returns its spare
# activation memory to the OS (ORT's arena otherwise keeps it for the life of the process).
RELEASE_AFTER_TOKENS = 2048


def length_groups(lengths: list[int], min_group: int = 4, max_ratio: float = 1.25,
                  max_tokens: int = MAX_PASS_TOKENS) -> list[list[int]]:
    """Indices grouped by similar token length, so padding wastes little compute.

    Texts are sorted by length; a group closes when the next text is more than ``max_ratio``
    times longer than the group's shortest, once the group has ``min_group`` texts (tiny groups
    would lose more to per-call overhead than padding costs), or when adding it would pad the
    group past ``max_tokens`` (rows x longest length; a single text is always its own group).
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        too_varied = len(current) >= min_group and lengths[i] > max_ratio * lengths[current[0]]
        too_big = (len(current) + 1) * lengths[i] > max_tokens
        if current and (too_varied or too_big):
            groups.append(current)
            current = []
        current.append(i)
    if current:
        last = groups[-1] if groups else None
        if last is not None and len(current) < min_group \
                and (len(last) + len(current)) * lengths[current[-1]] <= max_tokens:
            last.extend(current)
        else:
            groups.append(current)
    return groups


def encode_grouped(engine: EmbeddingEngine, texts: list[EncodedText]) -> np.ndarray:
    """Run the engine once per length group and return rows in the input order (blocking)."""
    lengths = [len(t.ids) for t in texts]
    groups = length_groups(lengths)
    out: np.ndarray | None = None
    if len(groups) == 1:
        out = engine.encode_core(TokenBatch.pad(texts))
    else:
        for group in groups:
            vectors = engine.encode_core(TokenBatch.pad([texts[i] for i in group]))
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[group] = vectors
    assert out is not None
    if max(len(g) * max(lengths[i] for i in g) for g in groups) >= RELEASE_AFTER_TOKENS:
        engine.release_memory()
    return out


@dataclass
class BatchOutcome:
    """Vectors of one request and what its batch cost."""

    vectors: np.ndarray
    queue_ns: int
    inference_ns: int
    batch_size: int


@dataclass
class _Pending:
    items: list[EncodedText]
    future: asyncio.Future[BatchOutcome]
    enqueued: float
    deadline: float | None
    vectors: list[np.ndarray] = field(default_factory=list)
    taken: int = 0  # items handed to a batch so far
    inference_ns: int = 0
    batch_size: int = 0
    started: float | None = None


class BatcherMetrics:
    """Prometheus histograms of the batcher."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.batch_size = Histogram("mesh_embedding_batch_size", "texts per inference batch",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=registry)
        self.queue_wait = Histogram("mesh_embedding_queue_wait_seconds", "time from enqueue to batch start",
                                    buckets=(0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25, 0.5, 1.0), registry=registry)
        self.inference = Histogram("mesh_embedding_inference_seconds", "inference time per batch",
                                   buckets=(0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256,
                                            0.512, 1.0, 2.0), registry=registry)
        self.queue_depth = Gauge("mesh_embedding_queue_depth", "texts waiting for a batch", registry=registry)
        self.queue_capacity = Gauge("mesh_embedding_queue_capacity",
                                    "texts the queue holds before answering RESOURCE_EXHAUSTED", registry=registry)


class MicroBatcher:
    """Collects texts from concurrent requests into batches of at most ``max_batch_size``."""

    def __init__(
        self,
        engine: EmbeddingEngine,
        *,
        max_batch_size: int,
        max_queue_delay_s: float,
        max_queue_texts: int,
        max_batch_tokens: int = 2048,
        metrics: BatcherMetrics | None = None,
    ) -> None:
        self.engine = engine
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_queue_delay_s = max_queue_delay_s
        self.max_queue_texts = max_queue_texts
        self.metrics = metrics
        self._queue: deque[_Pending] = deque()
        self._queued_texts = 0
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
        self._task: asyncio.Task[None] | None = None
        self._last_batch_s = 0.05  # prior for the retry estimate until a batch has run
        if metrics is not None:
            metrics.queue_depth.set_function(lambda: self._queued_texts)
            metrics.queue_capacity.set(max_queue_texts)

    @property
    def queued_texts(self) -> int:
        """Texts waiting for a batch."""
        return self._queued_texts

    def is_overloaded(self, extra: int = 0) -> bool:
        """True when ``extra`` more texts would not fit in the queue."""
        return self._queued_texts + extra > self.max_queue_texts

    def start(self) -> None:
        """Start the batching loop on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="micro-batcher")

    async def close(self) -> None:
        """Stop the loop and the inference thread."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self._executor.shutdown(wait=True)

    async def run_blocking(self, fn, *args):
        """Run ``fn`` on the inference thread (used for warm-up)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def submit(self, items: list[EncodedText], deadline: float | None = None) -> BatchOutcome:
        """Queue one request's texts; resolves when all of them are embedded."""
        if self.is_overloaded(len(items)):
            batches_ahead = (self._queued_texts + len(items)) / self.max_batch_size
            raise Overloaded(
                f"embedding queue is full ({self._queued_texts} texts waiting, limit {self.max_queue_texts})",
                retry_after_s=max(0.01, batches_ahead * self._last_batch_s),
            )
        loop = asyncio.get_running_loop()
        pending = _Pending(items=items, future=loop.create_future(), enqueued=time.perf_counter(),
                           deadline=deadline)
        self._queue.append(pending)
        self._queued_texts += len(items)
        self._wakeup.set()
        try:
            return await pending.future
        except asyncio.CancelledError:
            # The caller left: drop what has not started (a started batch finishes harmlessly).
            if pending in self._queue:
                self._queue.remove(pending)
                self._queued_texts -= len(items) - pending.taken
            raise

    def _take_batch(self) -> list[tuple[_Pending, int, int]]:
        """Slices ``(request, start, stop)`` filling one batch, oldest first; big requests split."""
        batch: list[tuple[_Pending, int, int]] = []
        room, tokens = self.max_batch_size, self.max_batch_tokens
        now = time.perf_counter()
        while self._queue and room > 0:
            head = self._queue[0]
            if head.future.done() or (head.deadline is not None and now > head.deadline):
                self._queue.popleft()
                self._queued_texts -= len(head.items) - head.taken
                if not head.future.done():
                    head.future.set_exception(DeadlineExceeded("deadline passed while queued"))
                continue
            start = stop = head.taken
            while stop < len(head.items) and stop - start < room:
                cost = len(head.items[stop].ids)
                if cost > tokens and (batch or stop > start):
                    break  # full by tokens (a text longer than the budget still runs, alone)
                tokens -= cost
                stop += 1
            if stop == start:
                break
            batch.append((head, start, stop))
            head.taken = stop
            self._queued_texts -= stop - start
            room -= stop - start
            if stop == len(head.items):
                self._queue.popleft()
            else:
                break  # the rest of a big request goes in the next batch
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            if self.max_queue_delay_s > 0 and self._queued_texts < self.max_batch_size:
                # Let a batch form, but never hold it longer than the delay.
                first = self._queue[0].enqueued
                wait = first + self.max_queue_delay_s - time.perf_counter()
                while wait > 0 and self._queued_texts < self.max_batch_size:
                    self._wakeup.clear()
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), wait)
                    except TimeoutError:
                        break
                    wait = first + self.max_queue_delay_s - time.perf_counter()
            slices = self._take_batch()
            if not slices:
                continue
            texts = [item for p, a, b in slices for item in p.items[a:b]]
            started = time.perf_counter()
            for p, _, _ in slices:
                if p.started is None:
                    p.started = started
            try:
                vectors = await loop.run_in_executor(self._executor, encode_grouped, self.engine, texts)
            except Exception as exc:  # noqa: BLE001 - delivered to every caller of the batch
                for p, _, _ in slices:
                    if not p.future.done():
                        p.future.set_exception(exc)
                    if p in self._queue:
                        self._queue.remove(p)
                        self._queued_texts -= len(p.items) - p.taken
                continue
            elapsed = time.perf_counter() - started
            self._last_batch_s = 0.8 * self._last_batch_s + 0.2 * elapsed
            if self.metrics is not None:
                self.metrics.batch_size.observe(len(texts))
                self.metrics.inference.observe(elapsed)
            offset = 0
            for p, a, b in slices:
                p.vectors.append(vectors[offset : offset + (b - a)])
                offset += b - a
                p.inference_ns += int(elapsed * 1e9)
                p.batch_size = max(p.batch_size, len(texts))
                if b == len(p.items) and not p.future.done():
                    queue_s = (p.started or started) - p.enqueued
                    if self.metrics is not None:
                        self.metrics.queue_wait.observe(queue_s)
                    p.future.set_result(BatchOutcome(
                        vectors=np.concatenate(p.vectors) if len(p.vectors) > 1 else p.vectors[0],
                        queue_ns=int(queue_s * 1e9), inference_ns=p.inference_ns,
                        batch_size=p.batch_size))
