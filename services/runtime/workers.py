"""Several worker processes of one service on one port (SO_REUSEPORT), under a supervising process.

``python -m services.<name> --workers N`` (and ``python -m gateway --workers N``) starts N copies of
itself with ``--workers 1 --reuse-port``: the first binds the port (a free one when it is 0), the
others bind the same port, and the kernel spreads new connections over them. Each worker exports its
own Prometheus endpoint (``--metrics-port`` + worker index). The supervisor prints one
``SERVING port=P workers=N`` line when all serve, and stops them all on SIGTERM or Ctrl-C; when one
exits by itself, it stops the rest and exits 1. Python's GIL caps a process at one core's worth of
Python, so this is how one host uses its cores (DESIGN.md, Scale-out).
"""

from __future__ import annotations

import subprocess
import sys

from services.runtime.processes import run_children, start_process


def worker_args(argv: list[str], *, index: int, port: int, metrics_port: int | None) -> list[str]:
    """The command line of worker ``index``: the supervisor's own, with the worker settings last (they win)."""
    out = [*argv, "--workers", "1", "--reuse-port", "--port", str(port)]
    if metrics_port is not None and metrics_port > 0:
        out += ["--metrics-port", str(metrics_port + index)]
    return out


def supervise(module: str, prog: str, workers: int, port: int, metrics_port: int | None,
              argv: list[str] | None = None) -> None:
    """Run ``workers`` copies of ``python -m module`` on one port until SIGTERM/Ctrl-C (never returns)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    procs: list[subprocess.Popen] = []

    def start() -> None:
        first, bound = start_process(module, *worker_args(argv, index=0, port=port, metrics_port=metrics_port),
                                     echo=_echo)
        procs.append(first)
        for i in range(1, workers):
            proc, _ = start_process(module, *worker_args(argv, index=i, port=bound, metrics_port=metrics_port),
                                    echo=_echo)
            procs.append(proc)
        print(f"SERVING port={bound} workers={workers} pids={','.join(str(p.pid) for p in procs)}", flush=True)

    run_children(prog, procs, start, describe=lambda p: f"worker pid {p.pid}")


def _echo(line: str) -> None:
    """Workers' own lines pass through; their SERVING lines and start-up errors are the supervisor's to report."""
    if not line.startswith(("SERVING ", "READY-PENDING ")) and ": error: " not in line:
        sys.stderr.write(line)
        sys.stderr.flush()
