"""Consistent hashing with bounded loads for routing sessions to reasoning instances.

A session id always reaches the same instance (so its engine's prefix cache is reused) unless that
instance carries more than ``1 + epsilon`` times the average load; then the session walks on to the
next instance on the ring (Mirrokni, Thorup, Zadimoghaddam, 2018).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Iterator
from contextlib import contextmanager


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


class BoundedLoadRing:
    """Targets on a hash ring (``vnodes`` points each) with per-target in-flight counts."""

    def __init__(self, targets: list[str], vnodes: int = 64, epsilon: float = 0.25) -> None:
        if not targets:
            raise ValueError("no targets")
        self.targets = list(dict.fromkeys(targets))
        self.epsilon = epsilon
        points = sorted((_hash(f"{t}#{i}"), t) for t in self.targets for i in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [t for _, t in points]
        self.load = dict.fromkeys(self.targets, 0)

    def capacity(self) -> int:
        """Most calls one target may carry when one more arrives."""
        return math.ceil((1 + self.epsilon) * (sum(self.load.values()) + 1) / len(self.targets))

    def pick(self, key: str) -> str:
        """The first target clockwise from ``key`` that is under capacity."""
        cap = self.capacity()
        start = bisect.bisect(self._keys, _hash(key)) % len(self._keys)
        for step in range(len(self._keys)):
            target = self._owners[(start + step) % len(self._keys)]
            if self.load[target] < cap:
                return target
        return self._owners[start]  # unreachable: capacity always leaves room somewhere

    def acquire(self, key: str) -> str:
        """Pick a target and count a call against it until :meth:`release` (for calls that outlive a block)."""
        target = self.pick(key)
        self.load[target] += 1
        return target

    def release(self, target: str) -> None:
        """The call counted by :meth:`acquire` ended."""
        self.load[target] -= 1

    @contextmanager
    def hold(self, key: str) -> Iterator[str]:
        """Pick a target and count the call against it while the block runs."""
        target = self.acquire(key)
        try:
            yield target
        finally:
            self.release(target)
