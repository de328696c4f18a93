"""Micro-batcher behaviour with a recording engine (a stand-in that implements the engine interface
so batch shapes, delays and failures can be observed and injected)."""

import asyncio
import threading
import time

import numpy as np
import pytest

from services.bootstrap.errors import DeadlineExceeded, Overloaded
from services.embedding.batcher import MicroBatcher
from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.tokenizer import EncodedText, TokenBatch
from services.embedding.errors import EngineUnavailable
from support.waiting import eventually_async


class RecordingEngine(EmbeddingEngine):
    """Returns each row's first content token as a one-hot-ish vector; records batch sizes."""

    name = "recording"

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.batches: list[int] = []
        self.thread_ids: set[int] = set()

    def encode_core(self, batch: TokenBatch) -> np.ndarray:
        self.thread_ids.add(threading.get_ident())
        self.batches.append(len(batch.input_ids))
        time.sleep(self.delay_s)
        if self.fail:
            raise EngineUnavailable("engine down")
        out = np.zeros((len(batch.input_ids), 4), dtype=np.float32)
        out[:, 0] = batch.input_ids[:, 1]
        return out


class GatedEngine(RecordingEngine):
    """Holds every batch until ``gate`` is set, so a test knows exactly which batch is running."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def encode_core(self, batch: TokenBatch) -> np.ndarray:
        self.batches.append(len(batch.input_ids))
        assert self.gate.wait(10), "the test never released the batch"
        self.batches.pop()
        return super().encode_core(batch)


async def running_batches(engine: RecordingEngine, n: int) -> None:
    """Wait until ``n`` batches have reached the engine."""
    await eventually_async(lambda: len(engine.batches), lambda k: k >= n, timeout_s=5, every_s=0.001,
                           what=f"{n} batches running")


def texts(*marks: int) -> list[EncodedText]:
    return [EncodedText(np.array([0, m, 2]), 3) for m in marks]


async def make(engine, **kw) -> MicroBatcher:
    args = dict(max_batch_size=4, max_queue_delay_s=0.0, max_queue_texts=100)
    args.update(kw)
    batcher = MicroBatcher(engine, **args)
    batcher.start()
    return batcher


async def engine_held(first: list[EncodedText], **kw) -> tuple[GatedEngine, MicroBatcher, asyncio.Future]:
    """A batcher (``kw``: see :func:`make`) over a GatedEngine that runs the batch of ``first`` and holds it
    at its gate: (the engine, the batcher, the first request)."""
    engine = GatedEngine()
    batcher = await make(engine, **kw)
    request = asyncio.ensure_future(batcher.submit(first))
    await running_batches(engine, 1)
    return engine, batcher, request


async def test_results_come_back_to_the_right_caller_in_order():
    engine = RecordingEngine()
    batcher = await make(engine)
    outs = await asyncio.gather(*(batcher.submit(texts(i, i + 100)) for i in range(10)))
    for i, out in enumerate(outs):
        assert list(out.vectors[:, 0]) == [i, i + 100]
    await batcher.close()
    assert threading.get_ident() not in engine.thread_ids  # inference never ran on the loop thread


async def test_concurrent_requests_share_batches_while_engine_is_busy():
    engine = RecordingEngine(delay_s=0.02)
    batcher = await make(engine, max_batch_size=8)
    outs = await asyncio.gather(*(batcher.submit(texts(i)) for i in range(16)))
    assert sorted(int(o.vectors[0, 0]) for o in outs) == list(range(16))
    assert max(engine.batches) > 1 and len(engine.batches) < 16
    assert max(o.batch_size for o in outs) == max(engine.batches)
    await batcher.close()


async def test_delay_lets_a_batch_form():
    engine = RecordingEngine()
    batcher = await make(engine, max_batch_size=8, max_queue_delay_s=0.05)

    async def later(i):
        await asyncio.sleep(0.005 * i)
        return await batcher.submit(texts(i))

    await asyncio.gather(*(later(i) for i in range(4)))
    assert engine.batches == [4]
    await batcher.close()


async def test_big_request_is_split_across_batches_and_reassembled():
    engine = RecordingEngine()
    batcher = await make(engine, max_batch_size=4)
    out = await batcher.submit(texts(*range(10)))
    assert list(out.vectors[:, 0]) == list(range(10))
    assert engine.batches == [4, 4, 2]
    assert batcher.queued_texts == 0
    await batcher.close()


async def test_full_queue_answers_overloaded_at_once_with_retry_hint():
    # the first batch holds the engine; the queue is empty again
    engine, batcher, first = await engine_held(texts(1, 2), max_batch_size=2, max_queue_texts=4)
    queued = [asyncio.ensure_future(batcher.submit(texts(3, 4))), asyncio.ensure_future(batcher.submit(texts(5, 6)))]
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as info:
        await batcher.submit(texts(7))
    assert not first.done()  # refused while the engine was still busy: nothing was waited for
    assert info.value.retry_after_s > 0
    engine.gate.set()
    await asyncio.gather(first, *queued)
    assert batcher.queued_texts == 0
    await batcher.close()


async def test_expired_deadline_is_dropped_before_inference():
    engine, batcher, busy = await engine_held(texts(1), max_batch_size=1)
    late = asyncio.ensure_future(batcher.submit(texts(2), deadline=time.perf_counter() + 0.01))
    await asyncio.sleep(0.02)  # the queued request's deadline passes while the engine is held
    engine.gate.set()
    with pytest.raises(DeadlineExceeded):
        await late
    await busy
    assert engine.batches == [1]
    await batcher.close()


async def test_cancelled_caller_leaves_the_queue_clean():
    engine, batcher, busy = await engine_held(texts(1), max_batch_size=1)
    waiting = asyncio.ensure_future(batcher.submit(texts(2, 3)))
    await asyncio.sleep(0)
    waiting.cancel()
    engine.gate.set()
    await busy
    await eventually_async(lambda: batcher.queued_texts, lambda k: k == 0, timeout_s=5, every_s=0.001,
                           what="the queue emptied")
    assert engine.batches == [1]
    await batcher.close()


def long_texts(n: int, width: int) -> list[EncodedText]:
    return [EncodedText(np.array([0, m] + [5] * (width - 3) + [2]), width) for m in range(1, n + 1)]


async def test_a_batch_holds_at_most_max_batch_tokens_and_a_lone_long_text_still_runs():
    engine = RecordingEngine()
    batcher = await make(engine, max_batch_size=32, max_batch_tokens=600)
    out = await batcher.submit(long_texts(7, 200))
    assert list(out.vectors[:, 0]) == list(range(1, 8))
    assert engine.batches == [3, 3, 1]
    engine.batches.clear()
    await batcher.submit(long_texts(2, 700))  # each over the budget: one per batch
    assert engine.batches == [1, 1]
    await batcher.close()


async def test_a_long_request_whose_caller_leaves_stops_after_the_batch_in_progress():
    engine = GatedEngine()
    batcher = await make(engine, max_batch_size=32, max_batch_tokens=400)
    big = asyncio.ensure_future(batcher.submit(long_texts(8, 200)))  # four batches of two
    await running_batches(engine, 1)
    big.cancel()
    query = asyncio.ensure_future(batcher.submit(texts(9)))
    engine.gate.set()
    assert (await query).vectors[0, 0] == 9  # answered after one batch of the big request, not four
    assert engine.batches == [2, 1]
    assert batcher.queued_texts == 0
    await batcher.close()


async def test_engine_failure_reaches_every_caller_of_the_batch_and_batcher_recovers():
    engine = RecordingEngine(fail=True)
    batcher = await make(engine)
    results = await asyncio.gather(batcher.submit(texts(1)), batcher.submit(texts(2)), return_exceptions=True)
    assert all(isinstance(r, EngineUnavailable) for r in results)
    engine.fail = False
    out = await batcher.submit(texts(3))
    assert out.vectors[0, 0] == 3
    assert batcher.queued_texts == 0
    await batcher.close()


def test_length_groups_cover_every_index_once_and_keep_similar_lengths_together():
    from services.embedding.batcher import length_groups

    lengths = [10, 50, 11, 52, 12, 49, 13, 51, 100]
    groups = length_groups(lengths, min_group=2, max_ratio=1.25)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        lens = [lengths[i] for i in g]
        assert max(lens) <= 2 * min(lens) or len(g) <= 2 or g is groups[-1]
    assert length_groups([7] * 5) == [[0, 1, 2, 3, 4]]


async def test_grouped_batches_return_rows_in_input_order():
    engine = RecordingEngine()
    batcher = await make(engine, max_batch_size=32)
    items = [EncodedText(np.array([0, m] + [5] * (m % 7) * 10 + [2]), 3) for m in range(1, 21)]
    out = await batcher.submit(items)
    assert list(out.vectors[:, 0]) == list(range(1, 21))
    assert len(engine.batches) > 1
    await batcher.close()


def test_length_groups_keep_every_pass_within_the_token_budget():
    from services.embedding.batcher import length_groups

    lengths = [512] * 64 + [20] * 30 + [300] * 10
    groups = length_groups(lengths, max_tokens=4096)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert len(g) * max(lengths[i] for i in g) <= 4096
    assert [len(g) for g in groups if lengths[g[0]] == 512] == [8] * 8
    # one text longer than the budget still runs, alone
    assert length_groups([600, 10], max_tokens=512) == [[1], [0]]


class ReleasingEngine(RecordingEngine):
    """Counts release_memory calls (the hook the ORT engine uses to shrink its arena)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = 0

    def release_memory(self) -> None:
        self.released += 1


def test_memory_is_released_after_a_large_batch_only():
    from services.embedding.batcher import RELEASE_AFTER_TOKENS, encode_grouped

    engine = ReleasingEngine()
    encode_grouped(engine, texts(*range(1, 33)))  # 32 texts of 3 tokens
    assert engine.released == 0
    width = RELEASE_AFTER_TOKENS // 4
    big = [EncodedText(np.array([0, m] + [5] * (width - 3) + [2]), width) for m in range(1, 9)]
    out = encode_grouped(engine, big)
    assert list(out[:, 0]) == list(range(1, 9))
    assert engine.released == 1
