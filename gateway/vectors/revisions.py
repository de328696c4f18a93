"""Which embedding revision each collection holds, so its queries are embedded by that model.

During a model change two embedding instances serve two revisions, and a collection's versions
swap from one to the other. The gateway asks retrieval which revision a collection holds (kept a
few seconds), embeds the query with the instance serving it, and when none of its own does, sends
no vector: retrieval, configured with every instance, embeds the query itself. A vector of the
wrong revision is never used: retrieval refuses it, and the search is sent again without one.
"""

from __future__ import annotations

import time

from clients.errors import MeshClientError
from clients.retrieval import AsyncRetrievalClient
from gateway.http.deadline import Deadline
from gateway.vectors.query import QueryVectors


class CollectionRevisions:
    """Collection -> embedding revision, asked of retrieval and kept ``ttl_s``."""

    def __init__(self, retrieval: AsyncRetrievalClient, ttl_s: float = 5.0) -> None:
        self.retrieval = retrieval
        self.ttl_s = ttl_s
        self._known: dict[str, tuple[str, float]] = {}

    async def get(self, name: str, deadline: Deadline) -> str:
        """The revision ``name`` holds, or "" when retrieval cannot say now (the search then tells)."""
        known = self._known.get(name)
        if known is not None and time.monotonic() - known[1] < self.ttl_s:
            return known[0]
        try:
            info = await self.retrieval.get_collection(name, timeout_s=min(0.25, max(0.001, deadline.remaining())))
        except MeshClientError:
            return ""
        if len(self._known) > 10000:  # collections come and go; the table never grows without bound
            self._known.clear()
        self._known[name] = (info.embedding_revision, time.monotonic())
        return info.embedding_revision

    def forget(self, name: str) -> None:
        """Ask again next time (retrieval refused a vector: the collection changed model)."""
        self._known.pop(name, None)


class VectorSources:
    """The gateway's embedding instances (the default first) and the one to use for a revision."""

    def __init__(self, default: QueryVectors, more: list[QueryVectors] | None = None) -> None:
        self.all = [default, *(more or [])]

    async def serving(self, revision: str, deadline: Deadline) -> QueryVectors | None:
        """The instance serving ``revision`` (None: none of the gateway's does).

        The default one when it cannot say what it serves (it is down or its breaker is open): its
        lookup then gives the reason the search degrades for, as with one instance.
        """
        unknown = False
        for source in self.all:
            served = await source.known_revision(deadline)
            if served == revision:
                return source
            unknown = unknown or (not served and source is self.all[0])
        return self.all[0] if unknown else None

    async def close(self) -> None:
        """Flush every source's pending cache writes (the default one closes the shared cache)."""
        for source in self.all[1:]:
            await source.flush()
        await self.all[0].close()
