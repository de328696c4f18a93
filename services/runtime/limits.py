"""The process's own limits (cgroup CPU quota and memory), exported as gauges beside its metrics."""

from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, Gauge


def _cpu_limit_cores() -> float:
    """The cgroup v2 CPU quota in cores, else the CPUs this process may run on."""
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    return float(len(os.sched_getaffinity(0)))


def _memory_limit_bytes() -> float:
    """The cgroup v2 memory limit, else the host's memory."""
    try:
        raw = open("/sys/fs/cgroup/memory.max").read().strip()
        if raw != "max":
            return float(raw)
    except (OSError, ValueError):
        pass
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 0.0


def register_process_limits(registry: CollectorRegistry = REGISTRY) -> None:
    """Gauges of this process's CPU and memory limits, so alerts compare usage with what it may use."""
    try:
        Gauge("mesh_process_cpu_limit_cores", "CPU cores this process may use (cgroup quota or affinity)",
              registry=registry).set_function(_cpu_limit_cores)
        Gauge("mesh_process_memory_limit_bytes", "memory this process may use (cgroup limit or host memory)",
              registry=registry).set_function(_memory_limit_bytes)
    except ValueError:  # already registered in this registry (one process, several servers in tests)
        pass


