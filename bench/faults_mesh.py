"""The fault suite's mesh: every process on loopback, restartable on its port, and what the gateway logged.

:class:`FaultMesh` starts Redis, embedding, retrieval, OCR, reasoning (over the scripted chat stand-in:
the real LLM answers in seconds on two cores, a fault suite sends hundreds of calls) and the gateway,
each on a port chosen once, so a process killed or frozen can be started again where its callers look
for it. The gateway's output is kept (its JSON access lines are what "every 5xx is logged" is checked
against). The load the scenarios put on it comes from :mod:`bench.load`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.common import free_port, side_by_side
from bench.standin import ChatStandIn
from services.runtime.processes import start_process, start_redis, stop_process

QUICK_CHAT = {"chunks": ["네", ", ", "알겠습니다"]}


class FaultMesh:
    """The whole mesh as processes, each restartable on the port it was first given."""

    SERVICES = ("redis", "embedding", "retrieval", "ocr", "reasoning", "gateway")

    def __init__(self, folder: Path, *, job_lease_s: float = 1.5, gateway_extra: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.job_lease_s = job_lease_s
        self.gateway_extra = gateway_extra
        self.ports = {name: free_port() for name in self.SERVICES}
        self.procs: dict[str, subprocess.Popen] = {}
        self.extra: list[subprocess.Popen] = []  # second gateways and the like
        self.gateway_lines: list[str] = []
        self.standin = ChatStandIn([QUICK_CHAT])
        self.start_s: dict[str, float] = {}

    # ---- processes --------------------------------------------------------------------------
    @property
    def base(self) -> str:
        """The gateway's URL."""
        return f"http://127.0.0.1:{self.ports['gateway']}"

    @property
    def redis_url(self) -> str:
        """Redis of the mesh (db 0: the gateway's caches and jobs)."""
        return f"redis://127.0.0.1:{self.ports['redis']}/0"

    def target(self, name: str) -> str:
        """host:port of a service."""
        return f"127.0.0.1:{self.ports[name]}"

    def gateway_args(self, port: int) -> list[str]:
        """Arguments of a gateway of this mesh on ``port``."""
        return ["--port", str(port), "--embedding-target", self.target("embedding"), "--retrieval-target",
                self.target("retrieval"), "--ocr-target", self.target("ocr"), "--reasoning-targets",
                self.target("reasoning"), "--redis-url", self.redis_url, "--job-lease-s", str(self.job_lease_s),
                "--breaker-failures", "2", "--breaker-reset-s", "1", *self.gateway_extra]

    def _args(self, name: str) -> list[str]:
        port = str(self.ports[name])
        quiet = ["--log-level", "WARNING"]
        if name == "embedding":
            return ["--port", port, "--intra-op-threads", "1", *quiet]
        if name == "retrieval":
            return ["--port", port, "--qdrant-location", str(self.folder / "q"), "--embedding-target",
                    self.target("embedding"), *quiet]
        if name == "ocr":
            return ["--port", port, "--engines", "1", "--redis-url", f"redis://127.0.0.1:{self.ports['redis']}/1",
                    *quiet]
        if name == "reasoning":
            return ["--port", port, "--backend-url", self.standin.url, *quiet]
        return self.gateway_args(self.ports[name])

    def start(self, name: str) -> float:
        """Start (or start again) one process on its port; returns the seconds until it served."""
        t = time.perf_counter()
        if name == "redis":
            self.procs[name], _ = start_redis(self.folder / "redis", port=self.ports["redis"])
        elif name == "gateway":
            self.procs[name], _ = start_process("gateway", *self._args(name), echo=self.gateway_lines.append)
        else:
            self.procs[name], _ = start_process(f"services.{name}", *self._args(name))
        self.start_s[name] = time.perf_counter() - t
        return self.start_s[name]

    def start_all(self) -> None:
        """Every process, started side by side (ports are fixed up front, so nobody waits for a dependency)."""
        self.start("redis")
        side_by_side(self.start, [n for n in self.SERVICES if n != "redis"])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a process (SIGKILL waits until it is gone)."""
        proc = self.procs[name]
        os.kill(proc.pid, sig)
        if sig == signal.SIGKILL:
            proc.wait(30)
            stop_process(proc, 2.0)  # whatever its group left

    def pid(self, name: str) -> int:
        """The process id of a service."""
        return self.procs[name].pid

    def start_second_gateway(self) -> tuple[subprocess.Popen, str]:
        """Another gateway on the same Redis and services; returns it and its URL."""
        port = free_port()
        proc, _ = start_process("gateway", *self.gateway_args(port))
        self.extra.append(proc)
        return proc, f"http://127.0.0.1:{port}"

    def close(self) -> None:
        """Stop everything this mesh started (a frozen process is continued first, so it can stop)."""
        for proc in [*self.extra, *reversed(list(self.procs.values()))]:
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            stop_process(proc, 10.0)
        self.standin.close()

    # ---- what the gateway logged and counted ------------------------------------------------
    def access_lines(self, since: int = 0) -> list[dict[str, Any]]:
        """The gateway's access lines (parsed) from output line ``since`` on."""
        out = []
        for line in self.gateway_lines[since:]:
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("logger") == "gateway.access" and isinstance(rec.get("status"), int):
                out.append(rec)
        return out

    def access_statuses(self, since: int = 0) -> Counter[int]:
        """Statuses of the gateway's access lines from line ``since`` on."""
        return Counter(rec["status"] for rec in self.access_lines(since))


def request_counts(base: str) -> Counter[int]:
    """``mesh_gateway_request_seconds_count`` summed by status, read from the gateway's /metrics."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    out: Counter[int] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "mesh_gateway_request_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_count"):
                out[int(sample.labels["status"])] += int(sample.value)
    return out


def wait_until(probe: Callable[[], bool], timeout_s: float, every_s: float = 0.1) -> float | None:
    """Seconds until ``probe()`` is true (exceptions count as false), or None when ``timeout_s`` passed."""
    t = time.perf_counter()
    while time.perf_counter() - t < timeout_s:
        try:
            if probe():
                return time.perf_counter() - t
        except Exception:  # noqa: BLE001 - a probe that cannot connect yet is simply not ready
            pass
        time.sleep(every_s)
    return None
