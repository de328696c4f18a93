"""Shared bench helpers: percentiles, machine facts, free ports, service processes, markdown."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from services.runtime.processes import start_process, stop_process

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

# The benches start the gateway on loopback without API keys; outside such local runs a gateway with no
# key refuses to start (gateway/__main__.py). Children inherit this; a caller's own setting wins.
os.environ.setdefault("MESH_GATEWAY_ALLOW_NO_AUTH", "1")


@dataclass
class LatencyStats:
    """Percentiles in milliseconds over pooled samples."""

    p50: float
    p95: float
    p99: float
    n: int

    @classmethod
    def of(cls, seconds: list[float]) -> LatencyStats:
        """Summarise samples given in seconds."""
        ms = np.asarray(seconds) * 1e3
        return cls(float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), float(np.percentile(ms, 99)), len(ms))


def machine_info() -> dict[str, str]:
    """CPU model, cores, memory, OS and Python of this machine."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        flags = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        simd = sorted({f for f in (flags.group(1).split() if flags else []) if f.startswith(("avx", "amx"))})
    except OSError:
        simd = []
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "simd": " ".join(simd) or "n/a",
        "memory": f"{mem_gib:.0f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def side_by_side(start: Callable[[T], object], items: Sequence[T]) -> None:
    """``start(item)`` for every item at once, each in its own thread; waits for all, then raises the first error."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        for _ in pool.map(start, items):
            pass


def start_service(module: str, *args: str, timeout_s: float = 120,
                  env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    """Start ``python -m module --port 0 ...`` quietly and wait until it serves (``env`` adds variables)."""
    return start_process(module, "--port", "0", "--log-level", "WARNING", *args, timeout_s=timeout_s, env=env)


def start_patient_reasoning(backend_url: str, *args: str) -> tuple[subprocess.Popen[str], int]:
    """The reasoning service over ``backend_url`` with 600 s deadlines (the embedded model on two cores is slow).

    ``args``: more reasoning flags.
    """
    return start_service("services.reasoning", "--backend-url", backend_url, "--total-timeout-s", "600",
                         "--first-token-timeout-s", "600", "--generation-timeout-s", "600", *args)


def start_retrieval_pair(folder: Path, model_dir: Path, procs: list, *, workers: int = 1,
                         env: dict[str, str] | None = None) -> tuple[int, int]:
    """Embedding and retrieval on ``folder`` as processes (``procs`` collects them); their ports."""
    many = ["--workers", str(workers)] if workers > 1 else []
    emb, emb_port = start_service("services.embedding", "--model-dir", str(model_dir), *many, env=env)
    procs.append(emb)
    ret, ret_port = start_service("services.retrieval", "--qdrant-location", str(folder), "--embedding-target",
                                  f"127.0.0.1:{emb_port}", env=env)
    procs.append(ret)
    return emb_port, ret_port


def start_search_mesh(folder: Path, model_dir: Path, procs: list, *, workers: int = 1,
                      env: dict[str, str] | None = None) -> str:
    """Embedding, retrieval on ``folder`` and a gateway as processes (``procs`` collects them); the gateway's URL.

    ``workers`` applies to embedding and the gateway (retrieval's embedded engine is one process's).
    """
    many = ["--workers", str(workers)] if workers > 1 else []
    emb_port, ret_port = start_retrieval_pair(folder, model_dir, procs, workers=workers, env=env)
    gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target",
                                f"127.0.0.1:{ret_port}", "--default-timeout-ms", "10000", *many, env=env)
    procs.append(gw)
    return f"http://127.0.0.1:{gw_port}"


def stop_service(proc: subprocess.Popen[str]) -> None:
    """SIGTERM and wait."""
    stop_process(proc)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def start_llm_mesh(llm_url: str, folder: Path, procs: list, *gateway_args: str,
                   reasoning_args: tuple[str, ...] = ()) -> int:
    """Embedding, retrieval, a patient reasoning service over ``llm_url`` and a gateway; the gateway's port.

    Processes on loopback (``procs`` collects them), retrieval's data in ``folder``; ``gateway_args`` are
    more gateway flags, ``reasoning_args`` more reasoning flags.
    """
    from services.runtime.models import current_model_dir

    emb_port, ret_port = start_retrieval_pair(folder / "qdrant", current_model_dir(), procs)
    rs, rs_port = start_patient_reasoning(llm_url, *reasoning_args)
    procs.append(rs)
    gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target",
                                f"127.0.0.1:{ret_port}", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                "--default-timeout-ms", "10000", *gateway_args)
    procs.append(gw)
    return gw_port


def ingest_catalog(http: Any, name: str, fields: dict, documents: list[dict]) -> None:
    """Create collection ``name`` through the gateway and ingest ``documents``, waiting for the job."""
    import time

    http.post("/v1/collections", json={"name": name, "fields": fields}).raise_for_status()
    job = http.post(f"/v1/collections/{name}/documents", json={"documents": documents}).json()
    state: dict = {}
    for _ in range(600):
        state = http.get(f"/v1/jobs/{job['id']}").json()
        if state["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.2)
    if state.get("state") != "succeeded":
        raise RuntimeError(f"{name} was not ingested: {state}")
