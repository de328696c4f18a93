"""The composition root: clients, the query-vector owner, the job store and every feature, built once.

Routes reach features through ``request.app.state.mesh`` (a :class:`Mesh`); tests build one with
their own cache or job store and pass it to :func:`gateway.app.create_app`.
"""

from __future__ import annotations

from dataclasses import dataclass

from clients import AsyncEmbeddingClient, AsyncRetrievalClient
from clients.ocr import AsyncOcrClient
from gateway.catalog.serving import Catalog
from gateway.config import GatewaySettings
from gateway.ocr.serving import Ocr
from gateway.openai_api.serving import OpenAiCompat
from gateway.reasoning.serving import Reasoning
from gateway.search.serving import Search
from gateway.vectors.breaker import CircuitBreaker, export_state
from gateway.vectors.cache import EmbeddingCache, LocalLruCache, RedisCache
from gateway.vectors.query import QueryVectors
from services.runtime.jobs import Jobs, MemoryJobs
from services.runtime.jobs.redis import RedisJobs


@dataclass
class Mesh:
    """Everything the routes use; :meth:`start` and :meth:`close` bracket the app's life."""

    vectors: QueryVectors
    retrieval: AsyncRetrievalClient
    search: Search
    catalog: Catalog
    openai: OpenAiCompat
    reasoning: Reasoning
    ocr: Ocr
    jobs: Jobs

    async def start(self) -> None:
        """Start this instance's job workers."""
        await self.jobs.start()

    async def close(self) -> None:
        """Stop job workers (running jobs stay leased and resume elsewhere), then close every client."""
        await self.jobs.close()
        await self.vectors.close()
        await self.retrieval.close()
        await self.ocr.client.close()
        await self.reasoning.close()


def build_mesh(settings: GatewaySettings, *, cache: EmbeddingCache | None = None) -> Mesh:
    """Clients, cache, breaker, jobs and features from settings (``cache`` overrides the configured one)."""
    if cache is None:
        cache = (RedisCache(settings.redis_url, settings.cache_ttl_s) if settings.redis_url
                 else LocalLruCache(settings.cache_max_entries))
    breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_reset_s)
    export_state(breaker, "embedding")
    vectors = QueryVectors(AsyncEmbeddingClient(settings.embedding_target), cache, breaker,
                           settings.embed_budget_share)
    retrieval = AsyncRetrievalClient(settings.retrieval_target)
    search = Search(vectors, retrieval)
    catalog = Catalog(retrieval)
    redis_url = settings.jobs_redis_url or settings.redis_url
    options = {"ttl_s": settings.job_ttl_s, "max_queued": settings.max_queued_jobs, "workers": settings.job_workers}
    jobs: Jobs = (RedisJobs(catalog.handlers(), redis_url, "gateway", lease_s=settings.job_lease_s, **options)
                  if redis_url else MemoryJobs(catalog.handlers(), **options))
    catalog.jobs = jobs
    return Mesh(vectors=vectors, retrieval=retrieval, search=search, catalog=catalog, openai=OpenAiCompat(vectors),
                reasoning=Reasoning(settings, search), ocr=Ocr(AsyncOcrClient(settings.ocr_target)), jobs=jobs)
