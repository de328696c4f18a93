"""The reasoning instances: one client each, the session ring over them, and stage deadlines.

A session id is routed to one reasoning instance by consistent hashing with bounded loads, so the
engine behind it keeps the conversation's prefix cached. The composition root owns the clients;
the pool only routes among them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from typing import Generic, Self, TypeVar

from clients.errors import MeshClientError
from clients.reasoning import AsyncReasoningClient, Timeouts
from gateway.config import GatewaySettings
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.reasoning.routing import BoundedLoadRing


class ReasoningPool:
    """Route a key (session or query) to a reasoning instance, with the stage deadlines of a call."""

    def __init__(self, clients: dict[str, AsyncReasoningClient], settings: GatewaySettings) -> None:
        self.clients = clients
        self.ring = BoundedLoadRing(list(clients), epsilon=settings.reasoning_load_epsilon)
        self.settings = settings

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
        """Wait for the first event: bad input and unreachable services fail here, before any byte is sent."""
        try:
            self._first = await anext(self.stream)
        except MeshClientError:
            await self.release()
            raise
        except StopAsyncIteration:
            await self.release()
            raise ApiError(503, "unavailable", "the reasoning stream ended without an event", retryable=True) from None
        return self

    async def release(self) -> None:
        """Close the RPC and free the ring slot (idempotent; also runs when the body never starts)."""
        if not self._released:
            self._released = True
            await self.stream.aclose()
            self.pool.release(self.target)
