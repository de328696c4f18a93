"""Request deadlines: the budget every hop of a request shares, from the ``X-Request-Timeout-Ms`` header.

:class:`Deadline` is plain (serving classes take one, tests build one); the FastAPI dependencies
below read the header, falling back to the route's default from the settings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, Request

from gateway.http.errors import ApiError, FieldError

TIMEOUT_HEADER = "X-Request-Timeout-Ms"
MAX_MS = 600_000


@dataclass
class Deadline:
    """The request's budget; every hop gets what is left of it."""

    total_s: float
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.total_s - (time.monotonic() - self.start))

    def check(self) -> float:
        """Seconds left, or a 504 when none are."""
        left = self.remaining()
        if left <= 0.001:
            raise ApiError(504, "deadline_exceeded", "the request deadline passed", retryable=True)
        return left


def parse_timeout(raw: str | None, default_ms: int) -> Deadline:
    """The deadline a header value asks for (1..600000 ms), or ``default_ms`` without one."""
    if raw is None:
        return Deadline(default_ms / 1000)
    try:
        ms = int(raw)
        if not 1 <= ms <= MAX_MS:
            raise ValueError
    except ValueError:
        raise ApiError(400, "invalid_argument", f"{TIMEOUT_HEADER} must be an integer 1..{MAX_MS}",
                       fields=[FieldError(field=TIMEOUT_HEADER, description=f"1..{MAX_MS}")]) from None
    return Deadline(ms / 1000)


def _dependency(setting: str) -> Any:
    def deadline(request: Request) -> Deadline:
        return parse_timeout(request.headers.get(TIMEOUT_HEADER), getattr(request.app.state.settings, setting))

    return Depends(deadline)


SEARCH = _dependency("default_timeout_ms")  # latency-critical search (2 s by default)
ADMIN = _dependency("admin_timeout_ms")  # management and bulk calls (30 s)
LLM = _dependency("reasoning_timeout_ms")  # LLM routes (60 s)
