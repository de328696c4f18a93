"""Start and stop mesh processes: the one helper the runner, the launchers, the benches and the tests share.

``start_process`` starts ``python -m <module>`` and waits for its ``SERVING port=N`` line; after it a
thread keeps reading the child's output (echoing it through ``echo`` when given), so a process that
logs a lot never blocks on a full pipe. Every child starts in its own session (process group), so
``stop_process`` stops it *and everything it started*. ``owns_port`` checks that the process we
started is the one listening, not something that already held the port.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import psutil

ROOT = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"SERVING port=(\d+)")


class LaunchError(RuntimeError):
    """A process could not be started; the message is one line naming the cause and the fix."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def port_holders(port: int) -> set[int]:
    """Pids listening on TCP ``port`` (any address); empty when nobody listens."""
    return {c.pid for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` can be bound now (nobody listens there; closing connections do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as every mesh server binds
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(port: int, what: str, host: str = "127.0.0.1") -> None:
    """Raise :class:`LaunchError` naming the port, its holder and the fix when ``port`` is taken."""
    if port == 0 or port_free(port, host):
        return
    holders = port_holders(port)
    who = ""
    if holders:
        names = []
        for pid in sorted(holders):
            try:
                names.append(f"pid {pid} ({' '.join(psutil.Process(pid).cmdline()[:3])})")
            except psutil.Error:
                names.append(f"pid {pid}")
        who = " by " + ", ".join(names)
    raise LaunchError(f"port {port} ({what}) is already in use{who}: stop that process or choose another port")


def owns_port(pid: int, port: int) -> bool:
    """Whether process ``pid`` or one of its descendants listens on ``port``."""
    try:
        family = {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return False
    return bool(port_holders(port) & family)


def last_line(text: str) -> str:
    """The last non-empty line of a process's output (its one-line error, when it failed cleanly)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def start_process(module: str, *args: str, timeout_s: float = 120.0,
                  echo: Callable[[str], None] | None = None,
                  python: str | None = None, env: dict[str, str] | None = None,
                  cwd: Path | None = None) -> tuple[subprocess.Popen[str], int]:
    """Start the module in its own session and return the process and the port it reported.

    ``env`` adds to (or overrides) this process's environment for the child; ``cwd`` (default: this
    checkout) is where it runs, so another checkout's module can be started (a bench's baseline).
    """
    proc = subprocess.Popen([python or sys.executable, "-m", module, *args], cwd=cwd or ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, **env} if env else None)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    try:
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
    except BaseException:  # interrupted (Ctrl-C, SIGTERM) while waiting: never leave the child behind
        stop_process(proc, 5.0)
        raise
    stop_process(proc, 5.0)
    output = "".join(seen[-40:])
    reason = last_line(output) or "no output"
    raise LaunchError(f"{module} did not start (exit {proc.returncode}): {reason}", output)


def _drain(proc: subprocess.Popen[str], echo: Callable[[str], None] | None) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if echo is not None:
            echo(line)


def stop_process(proc: subprocess.Popen, timeout_s: float = 20.0) -> int | None:
    """Stop a process and everything it started; returns its exit code.

    SIGTERM to the process first (a server stops its own children cleanly), SIGKILL after
    ``timeout_s``; then whatever is left in its process group (when it leads one) is stopped too.
    """
    group = _own_group(proc)
    if proc.poll() is None:
        _signal(proc, None, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _signal(proc, group, signal.SIGKILL)
            proc.wait()
    if group is not None:
        _reap_group(group)
    return proc.returncode


def _reap_group(group: int, timeout_s: float = 3.0) -> None:
    """SIGTERM what is left of a process group, then SIGKILL it after ``timeout_s``."""
    try:
        os.killpg(group, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(procs: list[subprocess.Popen], timeout_s: float = 20.0) -> None:
    """SIGTERM every process at once, then stop each as :func:`stop_process` does."""
    for proc in procs:
        if proc.poll() is None:
            _signal(proc, None, signal.SIGTERM)
    for proc in procs:
        stop_process(proc, timeout_s)


def _own_group(proc: subprocess.Popen) -> int | None:
    """The process group ``proc`` leads.

    Every child here starts its own session, so once it has exited (and can no longer be asked) its
    group id is still its pid: what it left behind is found there.
    """
    try:
        group = os.getpgid(proc.pid)
    except ProcessLookupError:
        return proc.pid if proc.returncode is not None else None
    return group if group == proc.pid else None


def _signal(proc: subprocess.Popen, group: int | None, sig: int) -> None:
    try:
        if group is not None:
            os.killpg(group, sig)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass


def run_children(prefix: str, procs: list[subprocess.Popen], start: Callable[[], None], *,
                 stopped: str = "", describe: Callable[[subprocess.Popen], str] | None = None) -> NoReturn:
    """The body every launcher shares (mesh runner, ops view, worker supervisor); never returns.

    ``start()`` starts the children, appending each to ``procs`` as soon as it runs. Then wait until
    SIGTERM or Ctrl-C (exit 0), or until a child exits by itself (exit 1); a :class:`LaunchError` is
    one line and exit 2. Every child's process group is stopped in all cases.
    """
    interrupt_on_sigterm()
    code = 0
    try:
        start()
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        name = describe or (lambda p: " ".join(map(str, p.args))[:80])  # type: ignore[arg-type]
        exited = ", ".join(f"{name(p)} (exit {p.returncode})" for p in procs if p.poll() is not None)
        print(f"{prefix}: error: a process exited: {exited}; stopping the others", file=sys.stderr, flush=True)
        code = 1
    except LaunchError as exc:
        print(f"{prefix}: error: {exc}", file=sys.stderr, flush=True)
        code = 2
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(list(reversed(procs)), 15.0)
        if stopped:
            print(stopped, flush=True)
    raise SystemExit(code)


def interrupt_on_sigterm() -> None:
    """Make SIGTERM act as Ctrl-C (KeyboardInterrupt), so a launcher's ``finally`` stops its children."""
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def start_redis(folder: Path, port: int = 0, timeout_s: float = 10.0,
                extra_args: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on loopback (a free port when ``port`` is 0), no persistence; returns it and its URL.

    ``extra_args``: more of redis-server's options (e.g. ``--cluster-enabled yes``).
    """
    import shutil

    if shutil.which("redis-server") is None:
        raise LaunchError("redis-server missing: run scripts/setup.sh (it installs it)")
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    require_free_port(port, "redis")
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder), *extra_args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LaunchError(f"redis-server exited ({proc.returncode}) on port {port}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG") and owns_port(proc.pid, port):
                        return proc, f"redis://127.0.0.1:{port}/0"
            except OSError:
                time.sleep(0.05)
    except BaseException:
        stop_process(proc, 2.0)
        raise
    stop_process(proc, 2.0)
    raise LaunchError(f"redis-server did not answer on port {port}")
