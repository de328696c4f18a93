"""The reasoning instances: one client each, the session ring over them, and stage deadlines.

A session id is routed to one reasoning instance by consistent hashing with bounded loads, so the
engine behind it keeps the conversation's prefix cached. The composition root owns the clients;
the pool only routes among them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Generic, Self, TypeVar

from prometheus_client import Gauge

from clients.reasoning import AsyncReasoningClient, Timeouts
from gateway.config import GatewaySettings
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.reasoning.routing import BoundedLoadRing

# What the ring counts per instance: calls holding a slot now (0 everywhere once the gateway is idle;
# a slot never given back shows here as a count that never returns to 0).
IN_FLIGHT = Gauge("mesh_gateway_reasoning_in_flight", "LLM calls holding a ring slot, per model route and instance",
                  ["route", "target"])


class ReasoningPool:
    """Route a key (session or query) to a reasoning instance, with the stage deadlines of a call."""

    def __init__(self, clients: dict[str, AsyncReasoningClient], settings: GatewaySettings, route: str = "",
                 model: str = "") -> None:
        self.clients = clients
        self.model = model  # the route's backend model: every call through this pool asks for it ('' = instances')
        self.ring = BoundedLoadRing(list(clients), epsilon=settings.reasoning_load_epsilon)
        self.settings = settings
        for target in self.ring.targets:  # the latest pool of a route and instance is the one reported
            IN_FLIGHT.labels(route, target).set_function(partial(self.ring.load.__getitem__, target))

    def timeouts(self, deadline: Deadline) -> Timeouts:
        """The stage deadlines of a call, bounded by what is left of the request's deadline."""
        left = deadline.check()
        s = self.settings
        return Timeouts(first_token_s=min(s.reasoning_first_token_s, left),
                        generation_s=min(s.reasoning_generation_s, left), total_s=min(s.reasoning_total_s, left))

    @contextmanager
    def hold(self, key: str) -> Iterator[AsyncReasoningClient]:
        """The client of ``key``'s instance, its ring slot held for the block."""
        with self.ring.hold(key) as target:
            yield self.clients[target]

    def acquire(self, key: str) -> tuple[str, AsyncReasoningClient]:
        """Take a slot on ``key``'s instance (give it back with :meth:`release`): its target and client."""
        target = self.ring.acquire(key)
        return target, self.clients[target]

    def release(self, target: str) -> None:
        """Give back a slot taken with :meth:`acquire`."""
        self.ring.release(target)


E = TypeVar("E")


class PooledStream(Generic[E]):
    """A streaming call holding a ring slot: started before any byte is sent, released exactly once."""

    def __init__(self, pool: ReasoningPool, target: str, stream: AsyncGenerator[E, None]) -> None:
        self.pool, self.target, self.stream = pool, target, stream
        self._released = False
        self._first: E | None = None

    async def start(self) -> Self:
        """Wait for the first event: bad input and unreachable services fail here, before any byte is sent.

        Whatever ends the wait early (an error, the caller cancelled or timed out) releases the slot.
        """
        try:
            self._first = await anext(self.stream)
        except StopAsyncIteration:
            await self.release()
            raise ApiError(503, "unavailable", "the reasoning stream ended without an event", retryable=True) from None
        except BaseException:
            await self.release()
            raise
        return self

    async def release(self) -> None:
        """Free the ring slot and close the RPC (idempotent; also runs when the body never starts).

        The slot is freed first and whatever happens to the close: a cancelled task (a client that left
        while its stream was open) is cancelled again at every await, so nothing after one may be relied on.
        """
        if not self._released:
            self._released = True
            self.pool.release(self.target)
            await self.stream.aclose()
