"""Consistent hashing with bounded loads (gateway/routing.py)."""

from __future__ import annotations

from gateway.reasoning.routing import BoundedLoadRing


def test_bounded_load_ring_moves_only_what_overflows():
    ring = BoundedLoadRing(["a", "b", "c"], epsilon=0.25)
    home = {k: ring.pick(k) for k in (f"s{i}" for i in range(300))}
    assert set(home.values()) == {"a", "b", "c"}
    # Hold many calls for one session: its home fills to capacity, the overflow walks on.
    held = [ring.hold("s1") for _ in range(6)]
    picked = [h.__enter__() for h in held]
    cap = ring.capacity()
    assert all(ring.load[t] <= cap for t in ring.targets)
    assert picked[0] == home["s1"] and len(set(picked)) > 1
    for h in held:
        h.__exit__(None, None, None)
    assert sum(ring.load.values()) == 0 and ring.pick("s1") == home["s1"]
