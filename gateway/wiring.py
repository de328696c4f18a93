"""The composition root: the clients, the query-vector owner, the job store and every feature, built in one pass.

The root owns every client and closes each once; features receive the clients they use. Routes
reach features through ``request.app.state.mesh`` (a :class:`Mesh`); tests build one with their own
cache or tracer provider and pass it to :func:`gateway.app.create_app`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

from clients import AsyncEmbeddingClient, AsyncRetrievalClient
from clients.ocr import AsyncOcrClient
from clients.reasoning import AsyncReasoningClient
from gateway.access.context import acting_as
from gateway.access.keys import ApiKeys, Principal
from gateway.answers.cache import AnswerCache
from gateway.answers.serving import Answers
from gateway.assistant.backend_tools import BackendTools, load_backend_tools
from gateway.assistant.serving import Assistant
from gateway.catalog.jobs import CatalogJobs
from gateway.catalog.serving import Catalog
from gateway.config import GatewaySettings
from gateway.conversations.finish import Finish
from gateway.conversations.sessions import Conversations
from gateway.files.budget import UploadBudget
from gateway.files.serving import Files
from gateway.http.admission import Slots
from gateway.interviews.sessions import Interviews
from gateway.ocr.serving import Ocr
from gateway.openai_api.completions import ChatCompletions
from gateway.openai_api.serving import OpenAiCompat
from gateway.reasoning.chat import Chat
from gateway.reasoning.client import CountedReasoningClient
from gateway.reasoning.pool import ReasoningPool
from gateway.reasoning.recommendations import Recommendations
from gateway.reasoning.routes import ModelRoutes
from gateway.reasoning.summaries import Summaries
from gateway.search.expansion import QueryExpander
from gateway.search.serving import Search
from gateway.tasks.serving import Tasks
from gateway.tasks.store import KeyValue, MemoryKeyValue, RedisKeyValue
from gateway.usage.accounting import JobCharges, QuotaExceeded
from gateway.usage.ledger import Ledger, MemoryLedger, RedisLedger
from gateway.usage.quotas import Quotas
from gateway.vectors.breaker import CircuitBreaker, export_state
from gateway.vectors.cache import EmbeddingCache, LocalLruCache, RedisCache
from gateway.vectors.query import QueryVectors
from gateway.vectors.revisions import VectorSources
from services.runtime.jobs import Handler, JobContext, JobRecord, Jobs, MemoryJobs
from services.runtime.jobs.redis import RedisJobs
from services.runtime.tasks.spec import BUILTIN_DIR, load_tasks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Clients:
    """One client per service (one per reasoning instance), owned by the root."""

    embedding: AsyncEmbeddingClient
    retrieval: AsyncRetrievalClient
    ocr: AsyncOcrClient
    reasoning: dict[str, AsyncReasoningClient]
    more_embedding: tuple[AsyncEmbeddingClient, ...] = ()  # one per further model during a model change
    # Catalog writes, ingest and reindex jobs, rollbacks: the one retrieval writer (the same client as
    # ``retrieval`` when --retrieval-writer-target is unset); searches go to ``retrieval`` (the readers).
    retrieval_writer: AsyncRetrievalClient | None = None

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> Clients:
        """The clients of the configured targets."""
        targets = dict.fromkeys(t for spec in settings.route_specs().values() for t in spec.targets)
        retrieval = AsyncRetrievalClient(settings.retrieval_target)
        writer = settings.retrieval_writer_target
        return cls(embedding=AsyncEmbeddingClient(settings.embedding_target),
                   retrieval=retrieval,
                   retrieval_writer=AsyncRetrievalClient(writer) if writer and writer != settings.retrieval_target
                   else retrieval,
                   ocr=AsyncOcrClient(settings.ocr_target),
                   reasoning={t: CountedReasoningClient(t) for t in targets},
                   more_embedding=tuple(AsyncEmbeddingClient(t) for t in settings.more_targets()))

    async def close(self) -> None:
        """Close every channel."""
        await self.embedding.close()
        for other in self.more_embedding:
            await other.close()
        await self.retrieval.close()
        if self.retrieval_writer is not None and self.retrieval_writer is not self.retrieval:
            await self.retrieval_writer.close()
        await self.ocr.close()
        for client in self.reasoning.values():
            await client.close()


@dataclass
class Mesh:
    """Everything the routes use; :meth:`start` and :meth:`close` bracket the app's life."""

    clients: Clients
    vectors: QueryVectors
    jobs: Jobs
    search: Search
    catalog: Catalog
    openai: OpenAiCompat
    recommendations: Recommendations
    chat: Chat
    summaries: Summaries
    ocr: Ocr
    routes: ModelRoutes
    completions: ChatCompletions
    answers: Answers
    tasks: Tasks
    store: KeyValue  # the task cache: on --redis-url, which may evict it
    sessions: KeyValue  # interviews and conversations: on --sessions-redis-url, which must not
    interviews: Interviews
    conversations: Conversations
    finish: Finish
    llm_slots: Slots  # the one cap on LLM work in flight: every LLM route, derived queries, preparations
    ledger: Ledger  # usage per key, route and model; quota reservations (the sessions' Redis)
    files: Files | None = None
    assistant: Assistant | None = None
    keys: ApiKeys | None = None  # the API keys and their scopes (the app's middleware reads the same object)

    async def start(self) -> None:
        """Start this instance's job workers."""
        await self.jobs.start()

    async def close(self) -> None:
        """Stop job workers (running jobs stay leased and resume elsewhere), flush the cache, close the clients."""
        await self.jobs.close()
        await self.interviews.close()
        if self.assistant is not None and self.assistant.backend is not None:
            await self.assistant.backend.close()
        await self.store.close()
        await self.sessions.close()
        await self.ledger.close()
        await self.search.sources.close()
        await self.clients.close()


def sessions_store(settings: GatewaySettings) -> KeyValue:
    """Where interviews and conversations live: their own Redis, else the cache's (warned), else this process."""
    if settings.sessions_redis_url:
        return RedisKeyValue(settings.sessions_redis_url)
    if settings.redis_url:
        log.warning("sessions share the cache's Redis (--redis-url): an evicting cache may drop an idle session; "
                    "set --sessions-redis-url to a Redis with noeviction and persistence")
        return RedisKeyValue(settings.redis_url)
    return MemoryKeyValue()


def ledger_of(settings: GatewaySettings) -> Ledger:
    """Usage counters and quota state: the sessions' Redis (never evicting), else the cache's, else this process."""
    url = settings.sessions_redis_url or settings.redis_url
    return RedisLedger(url) if url else MemoryLedger()


def changing(handler: Handler, cache: AnswerCache) -> Handler:
    """A job handler that writes a collection: its answers cached before are not served after it starts or ends."""
    async def run(record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any] | None:
        await cache.changed(record.subject)
        try:
            return await handler(record, payload, ctx)
        finally:
            await cache.changed(record.subject)
    return run


def for_owner(handler: Handler, keys: ApiKeys, charges: JobCharges | None = None) -> Handler:
    """A job handler run for the key that submitted the job (its ``owner``).

    That key's scopes hold and, with ``charges``, the LLM tokens it uses are charged to it after its quota
    is checked (a full quota fails the job). A job recorded before owners were runs as the gateway's own work.
    """
    async def run(record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any] | None:
        kid = record.meta.get("owner")
        if kid is None:
            return await handler(record, payload, ctx)
        principal = keys.by_id(kid) or Principal(kid, frozenset(), (), (), ())  # a key removed since: no access
        with acting_as(principal):
            if charges is None:
                return await handler(record, payload, ctx)
            try:
                return await charges.run(kid, f"job:{record.kind}", handler(record, payload, ctx))
            except QuotaExceeded as err:
                await ctx.progress(error=str(err))
                return None
    return run


def build_mesh(settings: GatewaySettings, *, cache: EmbeddingCache | None = None,
               tracer_provider: trace.TracerProvider | None = None, llm_slots: Slots | None = None,
               keys: ApiKeys | None = None, quotas: Quotas | None = None) -> Mesh:
    """Clients, cache, breaker, jobs and features from settings (``cache`` overrides the configured one).

    ``llm_slots``: the LLM cap the app's admission control shares (one from settings when not given);
    ``keys``, ``quotas``: the app's (jobs run for the key that submitted them and are charged to it; loaded
    from settings when not given).
    """
    llm_slots = llm_slots or Slots("llm", settings.max_inflight_llm)
    keys = keys or ApiKeys.load(settings.api_keys.get_secret_value(), settings.api_keys_file)
    clients = Clients.from_settings(settings)
    if cache is None:
        cache = (RedisCache(settings.redis_url, settings.cache_ttl_s) if settings.redis_url
                 else LocalLruCache(settings.cache_max_entries))
    breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_reset_s)
    export_state(breaker, "embedding")
    vectors = QueryVectors(clients.embedding, cache, breaker, settings.embed_budget_share)
    sources = VectorSources(vectors, [
        QueryVectors(client, cache, CircuitBreaker(settings.breaker_failures, settings.breaker_reset_s),
                     settings.embed_budget_share) for client in clients.more_embedding])
    redis_url = settings.jobs_redis_url or settings.redis_url
    writer = clients.retrieval_writer or clients.retrieval
    store: KeyValue = RedisKeyValue(settings.redis_url) if settings.redis_url else MemoryKeyValue()
    files = Files(clients.ocr, writer, store,
                  budget=UploadBudget(store, settings.max_queued_file_bytes, settings.job_ttl_s))
    answer_cache = AnswerCache(store, threshold=settings.answer_cache_threshold, ttl_s=settings.answer_cache_ttl_s,
                               max_entries=settings.answer_cache_max_entries)
    handlers = {kind: for_owner(changing(handler, answer_cache), keys) for kind, handler in
                {**CatalogJobs(writer, settings.ingest_outage_s).handlers(), **files.handlers()}.items()}
    options: dict[str, Any] = {"ttl_s": settings.job_ttl_s, "max_queued": settings.max_queued_jobs,
                               "workers": settings.job_workers, "tracer_provider": tracer_provider}
    jobs: Jobs = (RedisJobs(handlers, redis_url, "gateway", lease_s=settings.job_lease_s,
                            cluster=settings.jobs_redis_cluster, **options)
                  if redis_url else MemoryJobs(handlers, **options))
    routes = ModelRoutes(clients.reasoning, settings)
    search = Search(vectors, clients.retrieval, QueryExpander(routes, settings.route_of(settings.expand_route),
                                                              settings.expand_timeout_s, llm_slots,
                                                              settings.expand_min_s), sources)
    def pool(feature_route: str) -> ReasoningPool:
        return routes.get(settings.route_of(feature_route)).pool

    sessions = sessions_store(settings)
    tasks = Tasks(load_tasks([BUILTIN_DIR, *map(Path, settings.task_dirs())]), routes, settings.task_route_table(),
                  store)
    recommendations = Recommendations(search, pool(settings.recommendations_route))
    answers = Answers(search, routes, settings, answer_cache)
    backend = BackendTools(load_backend_tools(settings.assistant_tools_file)) if settings.assistant_tools_file \
        else None
    catalog = Catalog(writer, jobs)
    files.catalog = catalog
    catalog.on_delete.append(files.forget)
    catalog.on_change.append(answer_cache.changed)
    conversations = Conversations(tasks, search, recommendations, sessions, ttl_s=settings.conversation_ttl_s,
                                  max_turns=settings.conversation_max_turns)
    finish = Finish(conversations, routes, jobs, route=settings.route_of(settings.conversation_response_route),
                    summary_timeout_s=settings.conversation_summary_timeout_s,
                    reply_timeout_s=settings.conversation_reply_timeout_s,
                    reason_timeout_s=settings.conversation_reason_timeout_s)
    ledger = ledger_of(settings)
    charges = JobCharges(lambda: ledger, quotas or Quotas(settings.quotas_file), settings.quota_request_tokens,
                         settings.quota_lease_s)
    # The job store holds this dict: list jobs run on every instance.
    handlers.update({kind: for_owner(handler, keys, charges) for kind, handler in finish.handlers().items()})
    return Mesh(clients=clients, vectors=vectors, jobs=jobs, search=search, catalog=catalog, files=files,
                openai=OpenAiCompat(vectors, routes),
                recommendations=recommendations,
                chat=Chat(pool(settings.chat_route), settings.chat_history_tokens),
                summaries=Summaries(pool(settings.summaries_route), settings.summary_timeout_s),
                ocr=Ocr(clients.ocr, sessions, settings.job_ttl_s),
                routes=routes, completions=ChatCompletions(routes), answers=answers,
                tasks=tasks, store=store,
                sessions=sessions,
                interviews=Interviews(tasks, sessions, ttl_s=settings.interview_ttl_s,
                                      follow_up_below=settings.interview_follow_up_below_chars,
                                      prepare=settings.interview_prepare, slots=llm_slots,
                                      score_ahead=settings.interview_score_ahead),
                conversations=conversations, finish=finish, ledger=ledger,
                llm_slots=llm_slots,
                assistant=Assistant(routes, answers, tasks, sessions, ttl_s=settings.assistant_ttl_s, backend=backend,
                                    history_turns=settings.assistant_history_turns,
                                    tool_rounds=settings.assistant_tool_rounds,
                                    max_turns=settings.conversation_max_turns),
                keys=keys)
