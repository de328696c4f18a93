"""A watchdog for an asyncio event loop: which callback held it, for how long, with the stack that did.

Every service answers health checks, streams and every other caller from one event loop, so one
blocking call (a regex that backtracks, a parser, a proto built from 400 M characters) stalls them all.
Each callback the loop runs (``asyncio.Handle._run``, what asyncio's own debug mode times for its
slow-callback report) is timed on the watched thread; a thread takes the loop thread's stack once a
callback has run for most of ``threshold_s`` (the code holding the loop at that moment). A callback
over the threshold is recorded with its length: logged at WARNING, counted in
``mesh_event_loop_stalls_total``, appended to ``report_file`` when one is set (the test suite's guard
reads it: tests/conftest.py), and kept in :attr:`stalls`. Time the loop spends idle is never counted.

What is not the callback's: garbage collection (a full collection scans the whole heap), time its
thread sat runnable while other processes had the cores (``/proc`` schedstat), and time the machine
itself was taken — the hypervisor running other guests on its cores (steal in ``/proc/stat``, which a
thread's CPU clock counts as its own) or every task stalled on memory reclaim (``/proc/pressure/memory``
full) — are reported beside the stall and taken out of it. A callback whose thread neither ran nor was
seen blocking somewhere was waiting for the GIL, kept by native code on another thread (a model
loading, a large serialisation): reported as kind ``gil`` — the loop was held, but not by the code on it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter

log = logging.getLogger(__name__)
_WATCHED: set[int] = set()  # threads whose loop a watchdog times already (one per thread)
_STARTS: set[object] = set()  # start-ups under way in this process (see starting())
_STARTING = [0, 0]  # [unused, how many start-ups have begun]
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's unit
_GC = {"started": 0.0, "seconds": 0.0}  # the cyclic collector's time in this process, summed


def _gc_timer(phase: str, info: dict) -> None:
    if phase == "start":
        _GC["started"] = time.monotonic()
    elif _GC["started"]:
        _GC["seconds"] += time.monotonic() - _GC["started"]
        _GC["started"] = 0.0


@contextmanager
def starting() -> Iterator[None]:
    """A service is being built and warmed here: no caller is served yet, so its loop's stalls are not counted.

    A process serves from SERVING on (``serve`` starts its watchdog then); where several services share
    one loop (the test suite's in-process servers), their start-up is wrapped in this instead.
    """
    token = object()  # each start-up removes only its own mark, however start-ups interleave on the loop
    _STARTS.add(token)
    _STARTING[1] += 1
    try:
        yield
    finally:
        _STARTS.discard(token)
STALLS = Counter("mesh_event_loop_stalls", "times the event loop was held longer than the stall threshold "
                 "(kind: held by a callback, or kept waiting for the GIL by another thread)", ["kind"])


@dataclass
class Stall:
    """One time the loop was held: for how long, and where (the loop thread's stack while it was held)."""

    seconds: float
    stack: str
    gc_seconds: float = 0.0  # the garbage collector's time within the callback, not counted in ``seconds``
    cpu_wait_seconds: float = 0.0  # time the thread waited for a core (the machine busy), not counted either
    kind: str = "held"  # held: the callback's own work or a call it blocked in; gil: another thread kept the GIL
    machine_seconds: float = 0.0  # cores taken by the hypervisor, or every task stalled on memory: not counted

    def __str__(self) -> str:
        if self.kind == "gil":
            return (f"event loop kept waiting {self.seconds * 1000:.0f} ms for the GIL, held by native code on "
                    f"another thread, during:\n{self.stack}")
        notes = [f"{self.gc_seconds * 1000:.0f} ms of garbage collection"] if self.gc_seconds >= 0.01 else []
        notes += [f"{self.cpu_wait_seconds * 1000:.0f} ms waiting for a CPU"] if self.cpu_wait_seconds >= 0.01 else []
        notes += [f"{self.machine_seconds * 1000:.0f} ms the machine took (steal, memory stall)"] \
            if self.machine_seconds >= 0.01 else []
        extra = f" (besides {' and '.join(notes)})" if notes else ""
        return f"event loop held for {self.seconds * 1000:.0f} ms{extra} at:\n{self.stack}"


def _where(frame) -> str:
    """A stack as read when a stall is looked into: the project's own frames, then the innermost six."""
    frames = traceback.extract_stack(frame)
    own = [f for f in frames if "site-packages" not in f.filename and "/lib/python3" not in f.filename
           and not f.filename.startswith("<")]
    inner = [f for f in frames[-6:] if f not in own]
    return "".join(traceback.format_list(own[-10:])) + ("  ...\n" + "".join(traceback.format_list(inner))
                                                         if inner else "")


class LoopWatchdog:
    """Records every callback that holds the loop of the thread that calls :meth:`start` longer than ``threshold_s``."""

    def __init__(self, threshold_s: float = 0.2, name: str = "", report_file: str | Path | None = None) -> None:
        self.threshold_s = threshold_s
        self.name = name
        self.report_file = Path(report_file) if report_file else None
        self.stalls: list[Stall] = []
        self._loop_thread = 0
        self._started = 0.0  # when the callback running now began (0: none)
        self._stack = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._original: Callable[[asyncio.Handle], None] | None = None
        self._schedstat = ""  # the loop thread's /proc schedstat (Linux): its time waiting for a CPU
        # (monotonic, seconds the loop thread waited for a core, seconds the machine took), sampled
        self._waits: deque[tuple[float, float, float]] = deque(maxlen=800)

    def start(self) -> None:
        """Start timing the callbacks of this thread's loop, and watching from a daemon thread."""
        self._loop_thread = threading.get_ident()
        if self._loop_thread in _WATCHED:  # another watchdog times this thread (a test session's, say)
            return
        _WATCHED.add(self._loop_thread)
        self._schedstat = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self._original = original = asyncio.events.Handle._run
        watchdog = self

        def _run(handle: asyncio.Handle) -> None:
            if threading.get_ident() != watchdog._loop_thread or watchdog._started:
                original(handle)
                return
            watchdog._started = t = time.monotonic()
            cpu_before = time.thread_time()
            gc_before, starts_before, starting_before = _GC["seconds"], _STARTING[1], bool(_STARTS)
            try:
                original(handle)
            finally:
                # A full collection scans the whole heap, whatever the callback did: its time is reported,
                # not counted against the callback (gc_seconds_total shows it).
                collected = _GC["seconds"] - gc_before
                took = time.monotonic() - t - collected
                watchdog._started = 0.0
                # A callback that ran while a start-up was under way at any point (a start-up may end mid-callback)
                if took > watchdog.threshold_s and not (starting_before or _STARTS or _STARTING[1] != starts_before):
                    # Time the thread sat runnable while other processes had the cores is the machine's, not
                    # the callback's (a blocking call or the GIL held elsewhere is sleeping: still counted); so is
                    # time the hypervisor or memory reclaim took from every task (the thread's CPU clock runs on).
                    waited, taken = watchdog._waited_since(t)
                    waited = min(took, waited)
                    taken = min(took - waited, taken)
                    waited += taken
                    # The callback's own work (its thread on a core), or a call it blocks in (the watcher saw
                    # where): "held". Neither — its thread idle and unseen — is the GIL kept by native code on
                    # another thread: reported as such, the callback being its victim, not its cause.
                    ran = time.thread_time() - cpu_before
                    kind = "held" if watchdog._stack or ran >= 0.5 * (took - waited) else "gil"
                    if took - waited > watchdog.threshold_s:
                        watchdog._record(Stall(took - waited, watchdog._stack or f"(no stack taken) {handle!r}"[:2000],
                                               collected, waited - taken, kind, taken))
                watchdog._stack = ""

        asyncio.events.Handle._run = _run  # type: ignore[method-assign,assignment]
        if _gc_timer not in gc.callbacks:
            gc.callbacks.append(_gc_timer)
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop timing and watching."""
        self._stop.set()
        if self._original is not None:
            asyncio.events.Handle._run = self._original  # type: ignore[method-assign,assignment]
            self._original = None
            _WATCHED.discard(self._loop_thread)

    def _wait_now(self) -> float:
        """Seconds the loop thread has waited on a run queue so far (0 where /proc has no schedstat)."""
        try:
            with open(self._schedstat, encoding="ascii") as stat:
                return int(stat.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0

    @staticmethod
    def _machine_now() -> float:
        """Seconds the machine has taken from this guest's tasks so far: steal per core, plus memory full stall."""
        taken = 0.0
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = stat.readline().split()
            taken += int(fields[8]) / _TICKS / (os.cpu_count() or 1)  # steal, in clock ticks summed over cores
        except (OSError, IndexError, ValueError):
            pass
        try:
            with open("/proc/pressure/memory", encoding="ascii") as pressure:
                full = pressure.read().split("full ")[1]
            taken += int(full.rsplit("total=", 1)[1].split()[0]) / 1e6  # microseconds every task was stalled
        except (OSError, IndexError, ValueError):
            pass
        return taken

    def _waited_since(self, t: float) -> tuple[float, float]:
        """The loop thread's run-queue wait and the time the machine took (:meth:`_machine_now`) since about ``t``.

        From the last sample at or before ``t`` (0 and 0 when there is none).
        """
        before = next(((w, m) for at, w, m in reversed(self._waits) if at <= t), None)
        if before is None:
            return 0.0, 0.0
        return max(0.0, self._wait_now() - before[0]), max(0.0, self._machine_now() - before[1])

    def _watch(self) -> None:
        while not self._stop.wait(self.threshold_s / 8):
            self._waits.append((time.monotonic(), self._wait_now(), self._machine_now()))
            started = self._started
            if started and not self._stack and time.monotonic() - started > self.threshold_s * 0.75:
                frames = sys._current_frames()
                frame = frames.get(self._loop_thread)
                if frame is not None:
                    # The loop's own stack, and where every other thread is: a loop thread waiting for the
                    # GIL (in Thread.start, say) is held by whichever of them keeps it.
                    others = [f"  [{ident}] " + "".join(traceback.format_stack(f)[-1:]).strip().replace("\n", " ")
                              for ident, f in frames.items() if ident not in (self._loop_thread, threading.get_ident())]
                    stack = _where(frame) + "other threads:\n" + "\n".join(others[:12]) + "\n"
                    if self._started == started:  # still the same callback: a stack taken as it ended is not kept
                        self._stack = stack

    def _record(self, stall: Stall) -> None:
        self.stalls.append(stall)
        STALLS.labels(stall.kind).inc()
        log.warning("%s: %s", self.name or "event loop", stall)
        if self.report_file is not None:
            with self.report_file.open("a", encoding="utf-8") as out:
                # "---" opens a stall the test suite fails on; "~~~" one it reports only (the GIL kind)
                mark = "---" if stall.kind == "held" else "~~~"
                out.write(f"{mark} {self.name} (pid {os.getpid()}): {stall}\n")
