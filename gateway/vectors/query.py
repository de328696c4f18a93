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

import numpy as np

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

    async def known_revision(self, deadline: Deadline) -> str:
        """The revision this instance serves (asked within the budget share when not known; "" when it cannot say)."""
        return await self._known_revision(deadline)

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
        return (await self.lookup_many([text], deadline, field, indexed=False))[0]

    async def lookup_many(self, texts: list[str], deadline: Deadline, field: str = "queries",
                          indexed: bool = True) -> list[Lookup]:
        """Query vectors of ``texts``: cached ones from one cache round trip, the rest in ONE Embed call.

        Every text gets a :class:`Lookup` (all without a vector and with the same reason when the
        Embed call fails); bad text is a 400 naming ``field[i]`` (``field`` when not ``indexed``).
        """
        start = time.perf_counter()

        def done(vector: QueryVector | None, hit: bool = False, reason: str = "") -> Lookup:
            return Lookup(vector, (time.perf_counter() - start) * 1e3, hit, reason)

        revision = await self._known_revision(deadline)
        found: list[Lookup | None] = [None] * len(texts)
        if revision:
            cached = await self.cache.get_many([cache_key(revision, "query", t) for t in texts])
            for i, vec in enumerate(cached):
                if vec is not None:
                    found[i] = done(QueryVector(vec.tolist(), revision), hit=True)
        missing = [i for i, f in enumerate(found) if f is None]
        if not missing:
            return [f for f in found if f is not None]
        reason = ""
        if not self.breaker.allow():
            reason = "breaker_open"
        else:
            reason, result = await self._embed_queries([texts[i] for i in missing], deadline, field,
                                                       missing if indexed else None)
            if result is not None:
                for i, vector in zip(missing, result.vectors, strict=True):
                    await self._store(cache_key(result.model_revision, "query", texts[i]), vector)
                    found[i] = done(QueryVector(vector.tolist(), result.model_revision))
                if result.model_revision != revision:
                    self._info = None  # the model changed under us: asked again on the next call
        return [f if f is not None else done(None, reason=reason) for f in found]

    async def _embed_queries(self, texts: list[str], deadline: Deadline, field: str,
                             positions: list[int] | None) -> tuple[str, EmbedResult | None]:
        """One Embed call within the budget share: ``("", result)`` or ``(reason, None)``; bad text is a 400."""
        budget = min(deadline.check() * self.budget_share, deadline.remaining())
        try:
            result = await self.client.embed(texts, "query", timeout_s=max(0.0001, budget))
        except InvalidArgument as err:
            self.breaker.success()  # the service answered: the text was the problem
            raise ApiError(400, "invalid_argument", err.message, fields=[
                FieldError(field=_caller_field(v.field, field, positions), description=v.description)
                for v in err.violations] or [FieldError(field=field, description=err.message)]) from None
        except DeadlineExceeded:
            if budget >= MIN_TELLING_BUDGET_S:
                self.breaker.failure()
            else:
                self.breaker.inconclusive()
            return "deadline_exceeded", None
        except MeshClientError as err:
            self.breaker.failure()
            return err.code.name.lower(), None
        self.breaker.success()
        return "", result

    async def _store(self, key: str, vector: np.ndarray) -> None:
        stored = self.cache.set(key, vector)
        if self.cache.remote:  # a Redis round trip: written after the answer, off the cold path
            write = asyncio.ensure_future(stored)
            self._writes.add(write)
            write.add_done_callback(self._writes.discard)
        else:
            await stored

    async def query_vectors(self, texts: list[str], deadline: Deadline) -> tuple[list[np.ndarray], int]:
        """Query vectors for ``/v1/embeddings``, and the tokens the model ran on (cached texts: 0).

        Cache first; the misses in one call through the breaker (an open breaker is a 503).
        """
        info = await self.info(deadline)
        keys = [cache_key(info.revision, "query", t) for t in texts]
        vectors: list[np.ndarray | None] = list(await self.cache.get_many(keys))
        missing = [i for i, v in enumerate(vectors) if v is None]
        tokens = 0
        if missing:
            result = await self.embed_batch([texts[i] for i in missing], "query", deadline)
            for i, vector in zip(missing, result.vectors, strict=True):
                vectors[i] = vector
                await self._store(cache_key(result.model_revision, "query", texts[i]), vector)
            tokens = int(sum(result.token_counts))
        return [v for v in vectors if v is not None], tokens

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

    async def flush(self) -> None:
        """Finish pending cache writes."""
        await asyncio.gather(*self._writes, return_exceptions=True)

    async def close(self) -> None:
        """Finish pending cache writes and close the cache (the client is the composition root's)."""
        await self.flush()
        await self.cache.close()


def _caller_field(service_field: str, field: str, positions: list[int] | None) -> str:
    """The caller's name of a text the embedding service named ``texts[j]`` (``j`` of the texts sent)."""
    if positions is None or not service_field.startswith("texts["):
        return field
    try:
        return f"{field}[{positions[int(service_field[6:-1])]}]"
    except (ValueError, IndexError):
        return field
