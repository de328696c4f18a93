"""FastAPI app: the v1 routes, one error body, deadlines, API keys, size limits, request logs."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from clients import AsyncEmbeddingClient, AsyncRetrievalClient
from clients.ocr import AsyncOcrClient
from gateway import protocol as api
from gateway.auth import ApiKeys
from gateway.breaker import CircuitBreaker, export_state
from gateway.cache import LocalLruCache, RedisCache
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorBody, FieldError
from gateway.ocr import router as ocr_router
from gateway.readiness import readiness
from gateway.reasoning import Reasoning
from gateway.reasoning import router as reasoning_router
from gateway.serving import TIMEOUT_HEADER, Deadline, Mesh, request_deadline
from gateway.telemetry import RequestTelemetry

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in {
        400: "invalid request (fields named in `error.fields`)", 401: "missing or wrong API key",
        404: "unknown collection, job or model", 409: "conflict or failed precondition",
        413: "request body too large", 422: "request body does not match the schema",
        429: "overloaded; retry after `error.retry_after_s`", 499: "client closed the request",
        503: "a required service is unavailable", 504: "the request deadline passed"}.items()}


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is 413, declared or not (chunked uploads too)."""

    def __init__(self, app, limit: int, prefix_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.prefix_limits = prefix_limits or {}

    async def __call__(self, scope, receive, send):  # noqa: D102
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        limit = next((v for k, v in self.prefix_limits.items() if path.startswith(k)), self.limit)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = ApiError(413, "payload_too_large", f"body over {limit} bytes")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await _error(too_big)(scope, receive, send)
        # Read the body up front (it is bounded by the limit), so an oversized stream is refused
        # before any route sees it; then replay it to the app.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message]), send)
            seen += len(message.get("body", b""))
            if seen > limit:
                return await _error(too_big)(scope, receive, send)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}],
                                      receive), send)


def _replay(messages: list[dict], then=None):
    """An ASGI receive that returns ``messages`` first, then defers to ``then`` (or waits)."""
    queue = list(messages)

    async def receive():
        if queue:
            return queue.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive


def build_mesh(settings: GatewaySettings) -> Mesh:
    """Clients, cache and breaker from settings."""
    cache = (RedisCache(settings.redis_url, settings.cache_ttl_s) if settings.redis_url
             else LocalLruCache(settings.cache_max_entries))
    breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_reset_s)
    export_state(breaker, "embedding")
    return Mesh(AsyncEmbeddingClient(settings.embedding_target), AsyncRetrievalClient(settings.retrieval_target),
                cache, breaker, settings.embed_budget_share)


def create_app(settings: GatewaySettings, mesh: Mesh | None = None,
               tracer_provider: trace.TracerProvider | None = None) -> FastAPI:
    """The gateway application (``mesh`` overrides the one built from settings, for tests)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.mesh = mesh or build_mesh(settings)
        app.state.ocr = AsyncOcrClient(settings.ocr_target)
        app.state.reasoning = Reasoning(settings)
        yield
        await app.state.mesh.close()
        await app.state.ocr.close()
        await app.state.reasoning.close()

    app = FastAPI(title="Korean inference mesh gateway", version="1.0.0", lifespan=lifespan,
                  description="The backend's fixed REST contract: search, collections, ingest jobs, "
                              "OpenAI-compatible embeddings. Every error has the `ErrorBody` shape. "
                              f"Send `{TIMEOUT_HEADER}` to set the request deadline.")
    keys = ApiKeys.load(settings.api_keys.get_secret_value(), settings.api_keys_file)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes,
                       prefix_limits={"/v1/ocr/": settings.max_ocr_body_bytes})
    app.include_router(ocr_router)
    app.include_router(reasoning_router)
    app.state.settings = settings

    def the_mesh(request: Request) -> Mesh:
        return request.app.state.mesh

    def deadline(request: Request) -> Deadline:
        # Search is latency-critical; bulk embedding and management calls get the longer default.
        interactive = request.url.path == "/v1/search"
        return request_deadline(request, settings.default_timeout_ms if interactive else settings.admin_timeout_ms)

    @app.middleware("http")
    async def api_keys(request: Request, call_next):
        if keys.enabled and request.url.path.startswith("/v1/") and not keys.allows(request.headers):
            return _error(ApiError(401, "unauthenticated", "missing or wrong API key (X-API-Key or Authorization: "
                                                           "Bearer)"))
        return await call_next(request)

    # Outermost of ours (added last): request id, route-template metrics, the access line (gateway/telemetry.py).
    app.add_middleware(RequestTelemetry, routes=app.router.routes)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider or trace.get_tracer_provider(),
                                       excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"])

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        fields = [FieldError(field=".".join(str(p) for p in e["loc"] if p != "body"), description=e["msg"])
                  for e in exc.errors()]
        return _error(ApiError(400, "invalid_argument", "request does not match the schema", fields=fields))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(ApiError(exc.status_code, code, str(exc.detail)))

    @app.post("/v1/search", response_model=api.SearchResponse, responses=ERRORS, tags=["search"])
    async def search(body: api.SearchRequest, mesh: Mesh = Depends(the_mesh), dl: Deadline = Depends(deadline)):
        """Hybrid search; keyword-only (and `degraded`) when the query cannot be embedded in time."""
        out = await mesh.search(body, dl)
        return JSONResponse(out.model_dump(), headers={"X-Mesh-Degraded": "1" if out.degraded else "0",
                                                        "X-Mesh-Cache": "hit" if out.timings.cache_hit else "miss"})

    @app.post("/v1/collections", response_model=api.CollectionInfo, status_code=201, responses=ERRORS,
              tags=["collections"])
    async def create_collection(body: api.CollectionCreate, mesh: Mesh = Depends(the_mesh),
                                dl: Deadline = Depends(deadline)):
        """Create a catalog with its filterable fields."""
        return await mesh.create_collection(body, dl)

    @app.get("/v1/collections/{name}", response_model=api.CollectionInfo, responses=ERRORS, tags=["collections"])
    async def get_collection(name: str, mesh: Mesh = Depends(the_mesh), dl: Deadline = Depends(deadline)):
        """Describe a catalog (documents, revisions, fields)."""
        return await mesh.get_collection(name, dl)

    @app.post("/v1/collections/{name}/documents", response_model=api.Job, status_code=202, responses=ERRORS,
              tags=["collections"])
    async def ingest(name: str, body: api.IngestRequest, mesh: Mesh = Depends(the_mesh)):
        """Upsert documents as a background job; poll `GET /v1/jobs/{id}`."""
        return mesh.start_ingest(name, body)

    @app.post("/v1/collections/{name}/documents:delete", response_model=dict[str, int], responses=ERRORS,
              tags=["collections"])
    async def delete_documents(name: str, body: api.DeleteRequest, mesh: Mesh = Depends(the_mesh),
                               dl: Deadline = Depends(deadline)):
        """Remove documents by id."""
        return {"requested": await mesh.delete_documents(name, body, dl)}

    @app.post("/v1/collections/{name}/reindex", response_model=api.Job, status_code=202, responses=ERRORS,
              tags=["collections"])
    async def reindex(name: str, mesh: Mesh = Depends(the_mesh)):
        """Re-embed everything into a new collection and swap the alias, as a job."""
        return mesh.start_reindex(name)

    @app.get("/v1/jobs/{job_id}", response_model=api.Job, responses=ERRORS, tags=["jobs"])
    async def job(job_id: str, mesh: Mesh = Depends(the_mesh)):
        """A job's state and progress."""
        return mesh.job(job_id)

    @app.post("/v1/embeddings", response_model=api.EmbeddingsResponse, responses=ERRORS, tags=["openai"])
    async def embeddings(body: api.EmbeddingsRequest, mesh: Mesh = Depends(the_mesh),
                         dl: Deadline = Depends(deadline)):
        """OpenAI-compatible embeddings (float or base64)."""
        return await mesh.embeddings(body, dl)

    @app.get("/v1/models", response_model=api.ModelList, responses=ERRORS, tags=["openai"])
    async def models(mesh: Mesh = Depends(the_mesh), dl: Deadline = Depends(deadline)):
        """OpenAI-compatible model list."""
        info = await mesh.model_info(dl)
        return api.ModelList(data=[api.ModelCard(id=info.model_id, created=0, owned_by="korean-inference-mesh"),
                                   api.ModelCard(id=f"{info.model_id}:query", created=0,
                                                 owned_by="korean-inference-mesh")])

    @app.get("/healthz", response_model=api.Health, tags=["health"])
    async def healthz():
        """Liveness: the process answers."""
        return api.Health(status="ok")

    @app.get("/readyz", response_model=api.Health, responses={503: {"model": api.Health}}, tags=["health"])
    async def readyz(request: Request):
        """Readiness: retrieval must serve; OCR and reasoning are reported, not required.

        Search can degrade without embedding, so embedding down is `degraded`, not unavailable.
        """
        st = request.app.state
        body, ready = await readiness(st.mesh.embedding, st.mesh.retrieval, st.ocr, st.reasoning.clients,
                                      st.mesh.cache)
        return body if ready else JSONResponse(body.model_dump(), status_code=503)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["health"])
    async def metrics():
        """Prometheus metrics."""
        return PlainTextResponse(generate_latest().decode(), media_type=CONTENT_TYPE_LATEST)

    return app


def _error(exc: ApiError) -> JSONResponse:
    error = exc.body.error
    headers = None
    if error.retry_after_s or (error.retryable and exc.status in (429, 503)):  # a retryable refusal says when
        headers = {"Retry-After": str(max(1, round(error.retry_after_s or 1)))}
    return JSONResponse(exc.body.model_dump(), status_code=exc.status, headers=headers)


