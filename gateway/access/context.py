"""Who the running work acts for, and the checks every feature makes with it.

The API-key middleware sets the caller for the request (:func:`acting_as`); a task the request
starts inherits it; a worker running a job sets the job's owner again. Features ask:

- :func:`owner` when they create a stateful resource (recorded with it) and :func:`owns` when one is
  read, continued or cancelled: another key's resource is answered as one that does not exist (404,
  never 403: its existence is not revealed);
- :func:`require_read` / :func:`require_write` for a collection (a 404 as for a missing collection);
- :func:`require_model` for a model route (a 404 as for an unknown route).

Outside any request (start-up, warm-up) the caller is :data:`~gateway.access.keys.SYSTEM`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from gateway.access.keys import ANONYMOUS, SYSTEM, Principal
from gateway.http.errors import ApiError

_CALLER: contextvars.ContextVar[Principal] = contextvars.ContextVar("mesh_caller", default=SYSTEM)


def caller() -> Principal:
    """The principal the running work acts for."""
    return _CALLER.get()


def owner() -> str:
    """The id a resource created now is recorded under (``anonymous`` when keys are off)."""
    return _CALLER.get().id


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block (and the tasks it starts) for ``principal``."""
    token = _CALLER.set(principal)
    try:
        yield principal
    finally:
        _CALLER.reset(token)


def owns(recorded: str | None) -> bool:
    """Whether the caller owns a resource recorded under ``recorded``.

    A resource recorded before owners were (None) belongs to ``anonymous``: visible while keys are off,
    to no key once they are on. The gateway's own work (SYSTEM) sees every resource.
    """
    me = _CALLER.get()
    return me is SYSTEM or (recorded or ANONYMOUS) == me.id


def require_read(collection: str) -> None:
    """404 unless the caller may read ``collection``."""
    if not _CALLER.get().may_read(collection):
        raise ApiError(404, "not_found", f"collection {collection!r} does not exist")


def require_write(collection: str) -> None:
    """404 unless the caller may write ``collection`` (403 when it may read it: that it exists is known)."""
    me = _CALLER.get()
    if not me.may_write(collection):
        if me.may_read(collection):
            raise ApiError(403, "permission_denied", f"this key may read collection {collection!r}, not write it")
        raise ApiError(404, "not_found", f"collection {collection!r} does not exist")


def require_model(route: str) -> None:
    """404 ``model_not_found`` unless the caller may use model route ``route``."""
    if not _CALLER.get().may_use(route):
        raise ApiError(404, "model_not_found", f"model {route!r} is not a model route; GET /v1/models lists them")
