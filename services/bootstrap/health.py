"""Health per capability: a service is SERVING for what it can answer now.

A service names its dependencies (Redis, an LLM backend, the embedding service), each with a probe,
and its capabilities as gRPC health service names, each needing all (or any) of some dependencies.
A :class:`DependencyMonitor` probes every dependency on an interval and flips the capabilities'
health when a dependency goes down or comes back, by itself. A dependency that was up is taken down only
after ``down_after`` probes in a row failed (one slow answer on a loaded machine is no outage, as a
Kubernetes probe's ``failureThreshold``); one answer brings it back. It logs once per state change and,
while something stays down, a summary every ``summary_every_s`` — never a line per failed call.

Capability names follow the gRPC health protocol's per-service names: the service's full name for
its core (what ``""`` also reports), ``<full name>/<capability>`` for the rest, e.g.
``mesh.ocr.v1.OcrService/jobs``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from opentelemetry.instrumentation.utils import suppress_instrumentation

log = logging.getLogger(__name__)

Probe = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Dependency:
    """Something a capability needs; ``probe`` returns when it answers and raises when it does not.

    The probe must bound its own time (a timeout on the call it makes).
    """

    name: str
    probe: Probe


@dataclass(frozen=True)
class Requirement:
    """The dependencies a capability needs: ``all`` of them, or ``any`` one (failover backends)."""

    dependencies: tuple[str, ...]
    mode: Literal["all", "any"] = "all"

    def met(self, up: dict[str, bool]) -> bool:
        """Whether the capability can answer with dependencies in state ``up``."""
        if not self.dependencies:
            return True
        states = [up.get(name, False) for name in self.dependencies]
        return all(states) if self.mode == "all" else any(states)


@dataclass
class _State:
    up: bool | None = None  # None until the first probe
    since: float = field(default_factory=time.monotonic)
    reason: str = ""
    failures: int = 0  # failed probes in a row
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class DependencyMonitor:
    """Probes dependencies on an interval and tells listeners when one changes state."""

    def __init__(self, dependencies: list[Dependency], *, interval_s: float = 2.0, summary_every_s: float = 60.0,
                 probe_timeout_s: float = 2.0, down_after: int = 2) -> None:
        if down_after < 1:
            raise ValueError("down_after must be at least 1")
        self.dependencies = {d.name: d for d in dependencies}
        self.interval_s = interval_s
        self.summary_every_s = summary_every_s
        self.probe_timeout_s = probe_timeout_s
        self.down_after = down_after
        self._states = {name: _State() for name in self.dependencies}
        self._listeners: list[Callable[[], Awaitable[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._last_summary = time.monotonic()
        self._wake = asyncio.Event()

    def on_change(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Call ``listener`` after any dependency changed state."""
        self._listeners.append(listener)

    def up(self) -> dict[str, bool]:
        """Dependency name -> reachable at the last probe (False before the first)."""
        return {name: bool(s.up) for name, s in self._states.items()}

    def is_up(self, name: str) -> bool:
        """Whether ``name`` answered its last probe."""
        return bool(self._states[name].up)

    async def wait_up(self, name: str) -> None:
        """Return once ``name`` is up (at once when it already is)."""
        while not self._states[name].up:
            state = self._states[name]
            state.changed.clear()
            await state.changed.wait()

    def recheck(self) -> None:
        """Probe again now instead of at the next interval (a caller just saw a failure)."""
        self._wake.set()

    async def probe_all(self) -> None:
        """Probe every dependency once (concurrently) and apply the results."""
        results = await asyncio.gather(*(self._probe(d) for d in self.dependencies.values()))
        changed = False
        for dep, reason in zip(self.dependencies.values(), results, strict=True):
            changed |= self._apply(dep.name, reason)
        if changed:
            for listener in self._listeners:
                await listener()
        self._summarise()

    async def _probe(self, dep: Dependency) -> str | None:
        try:
            with suppress_instrumentation():  # probes are not requests: no spans for them
                await asyncio.wait_for(dep.probe(), self.probe_timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable now"; the reason is logged
            return f"{type(exc).__name__}: {exc}".strip().rstrip(":") or type(exc).__name__
        return None

    def _apply(self, name: str, reason: str | None) -> bool:
        state = self._states[name]
        up = reason is None
        state.failures = 0 if up else state.failures + 1
        if not up and state.up and state.failures < self.down_after:
            state.reason = reason or ""
            return False  # up until down_after probes in a row failed
        if state.up == up:
            state.reason = reason or ""
            return False
        now = time.monotonic()
        if up and state.up is False:
            log.info("dependency %s is back after %.1fs", name, now - state.since)
        elif not up:
            log.warning("dependency %s is down: %s", name, reason)
        state.up, state.since, state.reason = up, now, reason or ""
        state.changed.set()
        return True

    def _summarise(self) -> None:
        now = time.monotonic()
        if now - self._last_summary < self.summary_every_s:
            return
        self._last_summary = now
        down = [f"{name} ({now - s.since:.0f}s: {s.reason})" for name, s in self._states.items() if s.up is False]
        if down:
            log.warning("still down: %s", "; ".join(down))

    async def start(self) -> None:
        """Probe once (so health is right from the start), then keep probing in the background."""
        await self.probe_all()
        if self._task is None and self.dependencies:
            self._task = asyncio.create_task(self._loop(), name="dependency-monitor")

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.probe_all()
            except Exception:  # a listener failed: keep monitoring
                log.exception("dependency monitor round failed")

    async def close(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
