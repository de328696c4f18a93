"""Service processes for system tests: ``python -m <module>`` started until it prints ``SERVING port=N``.

A thin layer over services/runtime/processes.py (the helper the runner and the benches use), so tests start
and stop processes exactly as operators do: each child in its own process group, stopped with it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from services.runtime.processes import start_process, stop_process


class ServiceProcess:
    """A started module and the port it reported; stop() stops its whole process group."""

    def __init__(self, module: str, proc: subprocess.Popen[str], port: int) -> None:
        self.module = module
        self.proc = proc
        self.port = port

    @property
    def target(self) -> str:
        """``127.0.0.1:<port>`` (a gRPC target)."""
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (for the gateway)."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the process group goes too. Returns the exit code."""
        return stop_process(self.proc, timeout_s)

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_module(module: str, *args: str, timeout_s: float = 120.0,
                 env: dict[str, str] | None = None) -> ServiceProcess:
    """Start ``python -m module args...`` and wait for its ``SERVING port=`` line (a LaunchError if it never comes)."""
    proc, port = start_process(module, *args, timeout_s=timeout_s, env=env)
    return ServiceProcess(module, proc, port)


@contextmanager
def module_process(module: str, *args: str, timeout_s: float = 120.0,
                   env: dict[str, str] | None = None) -> Iterator[ServiceProcess]:
    """:func:`start_module` started on entering the block and stopped on leaving it (``off_loop`` takes it)."""
    with start_module(module, *args, timeout_s=timeout_s, env=env) as proc:
        yield proc
