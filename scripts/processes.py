"""Start a mesh process (``python -m <module>``) and wait for its ``SERVING port=N`` line.

The one helper the runner, the benches and the system tests share. After the SERVING line a
thread keeps reading the child's output (echoing it through ``echo`` when given), so a process
that logs a lot never blocks on a full pipe.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SERVING = re.compile(r"SERVING port=(\d+)")


def start_process(module: str, *args: str, timeout_s: float = 120.0,
                  echo: Callable[[str], None] | None = None,
                  new_session: bool = False) -> tuple[subprocess.Popen[str], int]:
    """Start the module and return the process and the port it reported."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=new_session)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if echo is not None:
            echo(line)
        m = _SERVING.match(line)
        if m:
            threading.Thread(target=_drain, args=(proc, echo), daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError(f"{module} did not report SERVING (exit {proc.poll()}):\n{''.join(seen[-40:])}")


def _drain(proc: subprocess.Popen[str], echo: Callable[[str], None] | None) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if echo is not None:
            echo(line)


def stop_process(proc: subprocess.Popen[str], timeout_s: float = 20.0) -> int | None:
    """SIGTERM, wait, SIGKILL when it does not stop; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def start_redis(folder: Path, port: int = 0, timeout_s: float = 10.0) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on loopback (a free port when ``port`` is 0), no persistence; returns it and its URL."""
    import shutil
    import socket

    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server missing: run scripts/setup.sh (it installs it)")
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"redis-server did not answer on port {port}")
