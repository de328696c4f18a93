"""The write gate and the record of writes a reindex replays (services/retrieval/writes.py)."""

import asyncio

from services.retrieval.query import Document
from services.retrieval.writes import PendingWrites, WriteGate, storable_violations


def test_exclusive_waits_for_writers_in_flight_and_holds_new_ones():
    async def scenario():
        gate, order = WriteGate(), []
        writer_in, writer_go = asyncio.Event(), asyncio.Event()

        async def write(tag, hold=None):
            async with gate.shared():
                order.append(f"{tag} in")
                if hold is not None:
                    writer_in.set()
                    await hold.wait()
                order.append(f"{tag} out")

        async def swap():
            async with gate.exclusive():
                order.append("swap")

        first = asyncio.ensure_future(write("w1", writer_go))
        await writer_in.wait()
        swapper = asyncio.ensure_future(swap())
        await asyncio.sleep(0)  # the swap is queued behind w1
        late = asyncio.ensure_future(write("w2"))
        await asyncio.sleep(0)
        assert order == ["w1 in"]  # neither the swap nor the late writer got in
        writer_go.set()
        await asyncio.gather(first, swapper, late)
        return order

    assert asyncio.run(scenario()) == ["w1 in", "w1 out", "swap", "w2 in", "w2 out"]


def test_a_cancelled_writer_does_not_block_the_gate():
    async def scenario():
        gate, inside = WriteGate(), asyncio.Event()

        async def stuck():
            async with gate.shared():
                inside.set()
                await asyncio.Event().wait()

        task = asyncio.ensure_future(stuck())
        await inside.wait()
        task.cancel()
        async with asyncio.timeout(5):
            async with gate.exclusive():
                return True

    assert asyncio.run(scenario())


def test_the_record_keeps_the_last_write_of_each_id():
    from services.retrieval.passages import Span
    from services.retrieval.prepare import Prepared

    pending = PendingWrites("rev", "document")
    pending.record_upsert(Prepared("a", "첫 글", {}, "document", [Span(0, 0, 3)], [[1.0]], [["글"]]))
    pending.record_delete(["a", "b"])
    pending.record_upsert(Prepared("b", "다시 쓴 글", {}, "document", [Span(0, 0, 6)], [[1.0]], [["글"]]))
    assert pending.touched("a") and pending.touched("b") and not pending.touched("c") and len(pending) == 2
    upserts, deleted = pending.take()
    assert list(upserts) == ["b"] and deleted == {"a"} and len(pending) == 0


def test_payload_values_the_store_cannot_keep_are_named():
    docs = [Document("a", "글", {"price": 1e300, "score": float("nan"), "deep": {"x": [float("inf")]}}),
            Document("b", "글", {"price": 2.0**63}), Document("c", "글", {"price": 2.0**62, "score": 1.5})]
    bad = {v.field for v in storable_violations(docs, {"price": "integer", "score": "float"})}
    assert bad == {"documents[0].payload.price", "documents[0].payload.score", "documents[0].payload.deep.x[0]",
                   "documents[1].payload.price"}
