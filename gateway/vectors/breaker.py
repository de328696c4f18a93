"""Circuit breaker: stop waiting on a dead dependency, try again by itself after a pause."""

from __future__ import annotations

import time

from prometheus_client import Gauge

OPEN = Gauge("mesh_gateway_breaker_open", "1 while a dependency's circuit breaker is not closed (open or half-open)",
             ["dependency"])


def export_state(breaker: CircuitBreaker, dependency: str) -> None:
    """Publish ``breaker``'s state as ``mesh_gateway_breaker_open{dependency=...}`` (read at scrape time)."""
    OPEN.labels(dependency).set_function(lambda: float(breaker.state != "closed"))


class CircuitBreaker:
    """closed -> (N consecutive failures) -> open -> (reset_s) -> half-open: one trial call."""

    def __init__(self, failures: int, reset_s: float) -> None:
        self.failures_to_open = failures
        self.reset_s = reset_s
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half-open``."""
        if self._opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self._opened_at >= self.reset_s else "open"

    def allow(self) -> bool:
        """Whether a call may go out now."""
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def success(self) -> None:
        """A call succeeded: close."""
        self._failures = 0
        self._opened_at = None
        self._trial_in_flight = False

    def inconclusive(self) -> None:
        """A call that tells nothing about the dependency (e.g. the caller's own deadline was too short)."""
        self._trial_in_flight = False

    def failure(self) -> None:
        """A call failed: count, and open (again) when due."""
        self._failures += 1
        self._trial_in_flight = False
        if self._opened_at is not None or self._failures >= self.failures_to_open:
            self._opened_at = time.monotonic()
