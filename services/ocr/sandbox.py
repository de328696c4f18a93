"""Reading a caller's file in a process of its own, stopped when it outlives its work budget.

A file's parser (pdfium, lxml, python-docx) is native code a thread cannot interrupt, and its cost
follows what the file holds, not its size: one 34 KB PDF can name 400 million characters, one DOCX
can inflate to 100 MB of XML. So each reading runs in a child process forked from a server process
that has the readers imported (``forkserver``: never a fork of the service itself, which runs gRPC
threads), with an address-space limit (``--file-memory-mb``) and a CPU limit, and the service waits for
it at most ``--file-budget-s`` of wall time; past that the child is killed and the caller gets a 400
naming the budget. The service's event loop only awaits: a hostile file costs one child's core, never
the loop, and at most ``concurrency`` children run at once (the rest wait their turn).

What a reader returns crosses back pickled, so readers return compact results (a PDF layer's
character boxes as one array per page, not an object per glyph) bounded by their own ceilings.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from prometheus_client import Counter, Histogram

from services.bootstrap.errors import InvalidInput, Violation

PRELOAD = ["services.ocr.files"]  # imported once by the fork server, so each child starts warm
READINGS = Counter("mesh_ocr_file_readings", "files read in a child process, by outcome", ["outcome"])
READING_SECONDS = Histogram("mesh_ocr_file_reading_seconds", "wall time of one file's reading in its child process",
                            buckets=(0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30))


@dataclass(frozen=True)
class Budget:
    """What one file's reading may spend: wall seconds and memory (the child's address space)."""

    seconds: float = 8.0
    memory_mb: int = 2048


def _bad(description: str, field_name: str) -> InvalidInput:
    return InvalidInput(f"{field_name}: {description}", [Violation(field_name, description)])


def _child(conn: Connection, fn: Callable[..., Any], args: tuple, budget: Budget) -> None:
    """In the child: limits first, then the reading; the result or the reader's named error goes back."""
    memory = budget.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(budget.seconds) + 2  # a backstop: the parent kills the child at the wall-clock budget
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        conn.send(("ok", fn(*args)))
    except InvalidInput as err:
        conn.send(("invalid", err.message, [(v.field, v.description) for v in err.violations]))
    except MemoryError:
        conn.send(("memory", "", []))
    except RecursionError:
        conn.send(("invalid", "content: nested too deep to read", [("content", "nested too deep to read")]))
    except Exception as err:  # noqa: BLE001 - a parser's own error on a hostile file: still the file's fault
        why = f"an unreadable file ({type(err).__name__})"
        conn.send(("invalid", f"content: {why}", [("content", why)]))
    finally:
        conn.close()


class ReadingProcesses:
    """Runs file readers in killable child processes, ``concurrency`` at a time, each under a :class:`Budget`."""

    def __init__(self, budget: Budget | None = None, concurrency: int = 2) -> None:
        self.budget = budget or Budget()
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._slots = asyncio.Semaphore(concurrency)

    async def run(self, fn: Callable[..., Any], *args: Any, field_name: str = "content") -> Any:
        """``fn(*args)`` in a child process: its result, or InvalidInput naming the budget it went over."""
        async with self._slots:
            return await asyncio.to_thread(self._run, fn, args, field_name)

    def _run(self, fn: Callable[..., Any], args: tuple, field_name: str) -> Any:
        receive, send = self._context.Pipe(duplex=False)
        child = self._context.Process(target=_child, args=(send, fn, args, self.budget), daemon=True)
        t = time.perf_counter()
        child.start()
        send.close()
        outcome = "ok"
        try:
            deadline = t + self.budget.seconds
            message = None
            while message is None:
                left = deadline - time.perf_counter()
                if left <= 0 or not receive.poll(left):
                    outcome = "over_time"
                    raise _bad(f"reading the file took over {self.budget.seconds:g} s, the work budget of one "
                               "file (--file-budget-s): it holds more than this service reads at once", field_name)
                try:
                    message = receive.recv()
                except EOFError:
                    child.join(1)
                    outcome = "died"
                    raise _bad(self._death(child.exitcode), field_name) from None
            if message[0] == "ok":
                return message[1]
            if message[0] == "memory":
                outcome = "over_memory"
                raise _bad(f"reading the file needs more than {self.budget.memory_mb} MB, the memory budget of "
                           "one file (--file-memory-mb)", field_name)
            outcome = "invalid"
            raise InvalidInput(message[1], [Violation(f, d) for f, d in message[2]])
        finally:
            receive.close()
            if child.is_alive():
                child.kill()
            child.join(5)
            READINGS.labels(outcome).inc()
            READING_SECONDS.observe(time.perf_counter() - t)

    def _death(self, exitcode: int | None) -> str:
        """Why a child ended without an answer, as the caller is told it."""
        if exitcode is not None and exitcode < 0:
            import signal

            name = signal.Signals(-exitcode).name
            if name in ("SIGXCPU", "SIGKILL"):
                return f"reading the file used over {self.budget.seconds:g} s of CPU, the work budget of one file"
            return (f"the file's reader stopped ({name}): a file this service cannot read within "
                    f"{self.budget.memory_mb} MB (--file-memory-mb)")
        return f"the file's reader ended without an answer (exit {exitcode})"
