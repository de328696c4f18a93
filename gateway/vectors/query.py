"""The gateway's one path to a query vector: the shared cache, then the embedding service behind a breaker.

Every vector leaves with the model revision that produced it, and retrieval refuses a vector whose
revision is not its collection's, so vector spaces are never mixed whichever side embedded. When
the vector cannot be had in time the caller gets a reason instead (``breaker_open``, ``unavailable``,
``deadline_exceeded`` …) and decides: search degrades to keyword-only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Literal

from clients import AsyncEmbeddingClient
from clients.embedding import EmbedResult, ModelInfo
from clients.errors import DeadlineExceeded, InvalidArgument, MeshClientError
from clients.retrieval import QueryVector
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError
from gateway.vectors.breaker import CircuitBreaker
from gateway.vectors.cache import EmbeddingCache, cache_key

log = logging.getLogger(__name__)
# A call given less than this cannot tell us anything about the service's health: its timeout is
# the caller's short deadline, not the service failing, so it never counts against the breaker.
MIN_TELLING_BUDGET_S = 0.05


@dataclass(frozen=True)
class Lookup:
    """A query vector (or why there is none) and what getting it cost."""

    vector: QueryVector | None
    ms: float
    cache_hit: bool
    reason: str  # empty when ``vector`` is set


class QueryVectors:
    """Cache + breaker + budget share around the embedding client (the one owner of query vectors)."""

    def __init__(self, client: AsyncEmbeddingClient, cache: EmbeddingCache, breaker: CircuitBreaker,
                 budget_share: float) -> None:
        self.client = client
        self.cache = cache
        self.breaker = breaker
        self.budget_share = budget_share
        self._info: ModelInfo | None = None
        self._writes: set[asyncio.Task[None]] = set()

    async def info(self, deadline: Deadline) -> ModelInfo:
        """The served model (asked once, then kept until a reply names another revision)."""
        if self._info is None:
            self._info = await self.client.info(timeout_s=deadline.check())
        return self._info

    @property
    def revision(self) -> str:
        """The model revision last seen, or empty before the first answer."""
        return self._info.revision if self._info is not None else ""

    async def _known_revision(self, deadline: Deadline) -> str:
        if self._info is None and self.breaker.allow():
            budget = min(0.5, deadline.check() * self.budget_share)
            try:
                self._info = await self.client.info(timeout_s=budget)
                self.breaker.success()
            except DeadlineExceeded:
                if budget >= MIN_TELLING_BUDGET_S:
                    self.breaker.failure()
                else:  # the caller's short deadline says nothing about the service
                    self.breaker.inconclusive()
            except MeshClientError:
                self.breaker.failure()
        return self.revision

    async def lookup(self, text: str, deadline: Deadline, field: str = "query") -> Lookup:
        """The query vector of ``text`` within the budget share; bad text is a 400 naming ``field``."""
        start = time.perf_counter()

        def done(vector: QueryVector | None, hit: bool = False, reason: str = "") -> Lookup:
            return Lookup(vector, (time.perf_counter() - start) * 1e3, hit, reason)

        revision = await self._known_revision(deadline)
        if revision:
            cached = await self.cache.get(cache_key(revision, "query", text))
            if cached is not None:
                return done(QueryVector(cached.tolist(), revision), hit=True)
        if not self.breaker.allow():
            return done(None, reason="breaker_open")
        budget = min(deadline.check() * self.budget_share, deadline.remaining())
        try:
            result = await self.client.embed([text], "query", timeout_s=max(0.0001, budget))
        except InvalidArgument as err:
            self.breaker.success()  # the service answered: the text was the problem
            raise ApiError(400, "invalid_argument", err.message, fields=[
                FieldError(field=field, description=v.description) for v in err.violations]
                or [FieldError(field=field, description=err.message)]) from None
        except DeadlineExceeded:
            if budget >= MIN_TELLING_BUDGET_S:
                self.breaker.failure()
            else:
                self.breaker.inconclusive()
            return done(None, reason="deadline_exceeded")
        except MeshClientError as err:
            self.breaker.failure()
            return done(None, reason=err.code.name.lower())
        self.breaker.success()
        vector = result.vectors[0]
        stored = self.cache.set(cache_key(result.model_revision, "query", text), vector)
        if self.cache.remote:  # a Redis round trip: written after the answer, off the cold path
            write = asyncio.ensure_future(stored)
            self._writes.add(write)
            write.add_done_callback(self._writes.discard)
        else:
            await stored
        if result.model_revision != revision:
            self._info = None  # the model changed under us: asked again on the next call
        return done(QueryVector(vector.tolist(), result.model_revision))

    async def embed_batch(self, texts: list[str], kind: Literal["query", "passage"], deadline: Deadline) -> EmbedResult:
        """Embed ``texts`` within the deadline, through the breaker (an open breaker is a 503 here: no fallback)."""
        if not self.breaker.allow():
            raise ApiError(503, "unavailable", "the embedding service is failing (circuit open); retry shortly",
                           retryable=True, retry_after_s=self.breaker.reset_s)
        budget = deadline.check()
        try:
            result = await self.client.embed(texts, kind, timeout_s=budget)
        except InvalidArgument:
            self.breaker.success()  # the service answered: the input was the problem
            raise
        except DeadlineExceeded:
            if budget >= MIN_TELLING_BUDGET_S:
                self.breaker.failure()
            else:
                self.breaker.inconclusive()
            raise
        except MeshClientError:
            self.breaker.failure()
            raise
        self.breaker.success()
        return result

    async def close(self) -> None:
        """Finish pending cache writes and close the cache (the client is the composition root's)."""
        await asyncio.gather(*self._writes, return_exceptions=True)
        await self.cache.close()
