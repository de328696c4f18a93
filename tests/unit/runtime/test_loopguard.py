"""The event-loop watchdog (services/runtime/loopguard.py): what it counts as a stall and what it does not."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

from services.runtime.loopguard import LoopWatchdog, Stall, starting


def _run(scenario, dog: LoopWatchdog | None = None) -> LoopWatchdog:
    """``scenario`` on a loop of its own thread (the test session's watchdog times this one's), watched."""
    dog = dog or LoopWatchdog(0.1, "unit")

    async def main() -> None:
        dog.start()
        try:
            await scenario()
        finally:
            dog.stop()

    thread = threading.Thread(target=asyncio.run, args=(main(),))
    thread.start()
    thread.join(30)
    return dog


def test_a_blocking_callback_is_a_stall_with_the_stack_that_held_the_loop():
    async def scenario():
        await asyncio.sleep(0.05)  # the watcher has sampled once
        time.sleep(0.25)  # blocking: sleeping, not waiting for a core, so it counts
        await asyncio.sleep(0.01)

    dog = _run(scenario)
    assert len(dog.stalls) == 1 and 0.2 < dog.stalls[0].seconds < 1.0
    assert "time.sleep(0.25)" in dog.stalls[0].stack and "test_loopguard.py" in dog.stalls[0].stack


def test_short_callbacks_and_start_up_are_not_stalls():
    async def scenario():
        for _ in range(20):
            time.sleep(0.01)
            await asyncio.sleep(0)
        with starting():  # a service being built: no caller is served yet
            time.sleep(0.25)
        time.sleep(0.02)  # the start-up ended mid-callback: this callback is still the start-up's
        await asyncio.sleep(0.01)

    assert [s for s in _run(scenario).stalls if s.kind == "held"] == []


def test_garbage_collection_inside_a_callback_is_reported_apart():
    async def scenario():
        heap = await asyncio.to_thread(lambda: [[i] for i in range(1_500_000)])  # a large heap, made off the loop
        t = time.perf_counter()
        gc.collect()  # a full collection traverses all of it, inside this callback
        collected.append(time.perf_counter() - t)
        await asyncio.sleep(0.01)
        del heap

    collected: list[float] = []
    held = [s for s in _run(scenario).stalls if s.kind == "held"]
    assert collected[0] > 0.1  # the collection alone was over the bound
    assert all(s.seconds < collected[0] for s in held)  # whatever is reported, the collection is not in it


def test_time_the_machine_took_from_every_task_is_not_a_stall():
    async def scenario():
        await asyncio.sleep(0.05)  # the watcher has sampled once
        time.sleep(0.25)  # as if the hypervisor had taken the cores (steal) for all of it
        await asyncio.sleep(0.01)

    dog = LoopWatchdog(0.1, "unit")
    dog._machine_now = time.monotonic  # the machine's clock of time taken runs with the wall clock
    assert _run(scenario, dog).stalls == []
    assert LoopWatchdog._machine_now() >= 0.0  # the real reading (/proc/stat steal, memory pressure) parses
    assert "50 ms the machine took" in str(Stall(0.3, "at", 0.0, 0.0, "held", 0.05))


def test_the_watchdog_leaves_the_loop_as_it_found_it():
    original = asyncio.events.Handle._run
    _run(lambda: asyncio.sleep(0.01))
    assert asyncio.events.Handle._run is original
