"""One service lifecycle for all four services: create -> start -> warm up (SERVING) -> stop -> release.

A service object (``services/<name>/server.py``) has the created :class:`MeshServer` as ``mesh``,
``warm_up()`` (slow work runs off the event loop; health turns SERVING at its end) and ``release()``
(engines, channels, stores: after the server stopped). The process runner
(:func:`services.bootstrap.server.run_service`) and the tests (``async with running(service)``)
drive every service through these same steps, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

from services.bootstrap.server import MeshServer


class MeshService(Protocol):
    """What every service object offers."""

    mesh: MeshServer

    async def warm_up(self) -> None:
        """Make the first requests fast (off the event loop), then turn SERVING."""

    async def release(self) -> None:
        """Free engines, channels and stores; called once, after the server stopped."""


S = TypeVar("S", bound=MeshService)


async def stop(service: MeshService, grace: float = 1.0) -> None:
    """Stop serving (in-flight calls get ``grace`` seconds), then release."""
    await service.mesh.stop(grace)
    await service.release()


@asynccontextmanager
async def running(service: S, grace: float = 0.5) -> AsyncIterator[S]:
    """Start and warm ``service`` for the block; stop and release it afterwards, whatever happened."""
    try:
        await service.mesh.start()
        await service.warm_up()
        yield service
    finally:
        await stop(service, grace)
