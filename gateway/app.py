"""The gateway application: middleware, one error path, the feature routers and their lifecycle.

Each feature lives in its own package (``search``, ``catalog``, ``openai_api``, ``reasoning``, ``ocr``,
``health``) with its REST models (``protocol.py``), its logic (``serving.py``, no HTTP) and a router
whose routes are a few lines; HTTP plumbing (errors, deadlines, body limits, API keys, telemetry,
docs) lives in ``gateway/http``; :mod:`gateway.wiring` builds the features from the settings.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from gateway.answers.router import router as answers_router
from gateway.assistant.router import router as assistant_router
from gateway.catalog.router import router as catalog_router
from gateway.config import GatewaySettings
from gateway.contract import RELEASE, released, without_unsent_422
from gateway.conversations.router import router as conversations_router
from gateway.files.router import router as files_router
from gateway.health.router import router as health_router
from gateway.http import errors
from gateway.http.admission import Group, RateLimit, Shedding, Slots
from gateway.http.auth import ApiKeys, RequireApiKey
from gateway.http.deadline import TIMEOUT_HEADER
from gateway.http.docs import install_docs
from gateway.http.limits import BodyLimit
from gateway.http.looplag import warm_routes, watch_loop
from gateway.http.streams import add_stream_schemas
from gateway.http.telemetry import RequestTelemetry
from gateway.interviews.router import router as interviews_router
from gateway.ocr.router import router as ocr_router
from gateway.openai_api.router import router as openai_router
from gateway.reasoning.router import router as reasoning_router
from gateway.search.router import router as search_router
from gateway.tasks.router import router as tasks_router
from gateway.usage.accounting import UsageAccounting
from gateway.usage.quotas import Quotas
from gateway.usage.router import router as usage_router
from gateway.wiring import Mesh, build_mesh
from services.runtime.korean import morphs
from services.runtime.loopguard import LoopWatchdog

# The contract's version: minor for additions since the release in gateway/releases/, major for a break.
VERSION = "1.1.0"
DESCRIPTION = ("The backend's fixed REST contract: search, collections, ingest jobs, OpenAI-compatible embeddings. "
               f"Every error has the `ErrorBody` shape. Send `{TIMEOUT_HEADER}` to set the request deadline.")


def _document_only_what_is_sent(app: FastAPI) -> None:
    """The OpenAPI document without the 422 the gateway never sends (frozen v1 operations keep theirs)."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = add_stream_schemas(without_unsent_422(generate(),
                                                                       released() if RELEASE.exists() else {}))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


# The routes that call the LLM: a request of theirs that writes (POST) takes a slot of the one LLM cap;
# reads of stored state (GET of an interview, a conversation, a task's definition) take none.
LLM_ROUTES = ("/v1/chat", "/v1/summaries", "/v1/answers", "/v1/tasks/", "/v1/interviews", "/v1/conversations",
              "/v1/recommendations", "/v1/assistant")


def admission_groups(settings: GatewaySettings, llm_slots: Slots) -> list[Group]:
    """The caps of the gateway's routes: searches, embeddings, and the one shared LLM cap."""
    return [Group(Slots("search", settings.max_inflight_search), ("/v1/search", "/v1/recommendations")),
            Group(Slots("embeddings", settings.max_inflight_embeddings), ("/v1/embeddings",)),
            Group(llm_slots, LLM_ROUTES, frozenset({"POST", "PUT", "PATCH"}))]


def create_app(settings: GatewaySettings, mesh: Mesh | None = None,
               tracer_provider: trace.TracerProvider | None = None) -> FastAPI:
    """The gateway application (``mesh`` overrides the one built from settings, for tests)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.mesh = mesh or build_mesh(settings, llm_slots=llm_slots, keys=keys, quotas=quotas)
        await asyncio.to_thread(warm_routes, app)
        await asyncio.to_thread(morphs.tokens, "")  # Kiwi (~3 s) loaded before the first answer's question is read
        await app.state.mesh.start()
        lag = asyncio.create_task(watch_loop(settings.loop_lag_probe_ms / 1000)) if settings.loop_lag_probe_ms else None
        watchdog = LoopWatchdog(settings.loop_stall_ms / 1000, "gateway", settings.loop_stall_file or None) \
            if settings.loop_stall_ms else None
        if watchdog is not None:
            watchdog.start()
        yield
        if watchdog is not None:
            watchdog.stop()
        if lag is not None:
            lag.cancel()
        await app.state.mesh.close()

    llm_slots = mesh.llm_slots if mesh is not None else Slots("llm", settings.max_inflight_llm)
    keys = mesh.keys if mesh is not None and mesh.keys is not None else \
        ApiKeys.load(settings.api_keys.get_secret_value(), settings.api_keys_file)
    quotas = Quotas(settings.quotas_file)
    app = FastAPI(title="Korean inference mesh gateway", version=VERSION, lifespan=lifespan, description=DESCRIPTION,
                  docs_url=None, redoc_url=None)  # local pages instead: install_docs
    app.state.settings = settings
    for router in (search_router, catalog_router, openai_router, ocr_router, reasoning_router, answers_router,
                   tasks_router, interviews_router, conversations_router, assistant_router, files_router,
                   usage_router, health_router):
        app.include_router(router)
    errors.install(app)
    install_docs(app)
    # Middleware, innermost first: body limits, load shedding, rate limits, API keys, then (outermost)
    # request id, metrics and the access line, so every refusal above is logged and counted too.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, prefix_limits={
        "/v1/ocr/": settings.max_ocr_body_bytes, "/v1/masking/": settings.max_ocr_body_bytes,
        "/v1/ocr:extract": settings.max_extract_body_bytes, "/v1/collections/": settings.max_ingest_body_bytes,
        "/v1/files:": settings.max_ingest_body_bytes})
    app.add_middleware(Shedding, wait_s=settings.shed_wait_s, groups=admission_groups(settings, llm_slots))
    app.add_middleware(RateLimit, rate=settings.rate_limit_per_s, burst=settings.rate_limit_burst)
    if settings.usage_accounting:
        app.add_middleware(UsageAccounting, ledger=lambda: app.state.mesh.ledger,
                           quotas=quotas, llm_routes=LLM_ROUTES, routes=app.router.routes,
                           estimate=settings.quota_request_tokens, lease_s=settings.quota_lease_s)
    app.add_middleware(RequireApiKey, keys=keys, protect_ops=settings.protect_ops, routes=app.router.routes)
    app.add_middleware(RequestTelemetry, routes=app.router.routes)
    _document_only_what_is_sent(app)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider or trace.get_tracer_provider(),
                                       excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"])
    return app
