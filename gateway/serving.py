"""The gateway's composition logic over the service clients (no HTTP here)."""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from mesh.retrieval.v1 import retrieval_pb2 as rpb
from opentelemetry import trace
from prometheus_client import Counter

from clients import AsyncEmbeddingClient, AsyncRetrievalClient
from clients.errors import DeadlineExceeded, InvalidArgument, MeshClientError, Overloaded, Unavailable
from gateway import protocol as api
from gateway.breaker import CircuitBreaker
from gateway.cache import EmbeddingCache, cache_key
from gateway.errors import ApiError, FieldError, from_client_error
from gateway.telemetry import note

log = logging.getLogger(__name__)
DEGRADED = Counter("mesh_gateway_search_degraded", "searches answered keyword-only", ["reason"])
for _reason in ("breaker_open", "unavailable", "deadline_exceeded", "resource_exhausted", "unknown"):
    DEGRADED.labels(_reason)  # every series exists from the start
TRACER = trace.get_tracer("gateway")
MODES = {"hybrid": rpb.SEARCH_MODE_HYBRID, "dense": rpb.SEARCH_MODE_DENSE, "keyword": rpb.SEARCH_MODE_KEYWORD}
MODE_NAMES = {v: k for k, v in MODES.items()}
FIELD_TYPES = {"keyword": rpb.FIELD_TYPE_KEYWORD, "integer": rpb.FIELD_TYPE_INTEGER,
               "float": rpb.FIELD_TYPE_FLOAT, "bool": rpb.FIELD_TYPE_BOOL}
FIELD_NAMES = {v: k for k, v in FIELD_TYPES.items()}


TIMEOUT_HEADER = "X-Request-Timeout-Ms"


@dataclass
class Deadline:
    """The request's budget; every hop gets what is left of it."""

    total_s: float
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.total_s - (time.monotonic() - self.start))

    def check(self) -> float:
        """Seconds left, or a 504 when none are."""
        left = self.remaining()
        if left <= 0.001:
            raise ApiError(504, "deadline_exceeded", "the request deadline passed", retryable=True)
        return left


def request_deadline(request, default_ms: int) -> Deadline:
    """The request's deadline: the ``X-Request-Timeout-Ms`` header (1..600000) or ``default_ms``."""
    raw = request.headers.get(TIMEOUT_HEADER)
    if raw is None:
        return Deadline(default_ms / 1000)
    try:
        ms = int(raw)
        if not 1 <= ms <= 600000:
            raise ValueError
    except ValueError:
        raise ApiError(400, "invalid_argument", f"{TIMEOUT_HEADER} must be an integer 1..600000",
                       fields=[FieldError(field=TIMEOUT_HEADER, description="1..600000")]) from None
    return Deadline(ms / 1000)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _condition(c: api.FilterCondition, where: str) -> rpb.Condition:
    tests = [c.eq is not None, c.any_of is not None, any(v is not None for v in (c.gte, c.gt, c.lte, c.lt))]
    if sum(tests) != 1:
        raise ApiError(400, "invalid_argument", "invalid filter",
                       fields=[FieldError(field=where, description="give exactly one of eq, any_of, or range bounds")])
    if isinstance(c.eq, int) and not isinstance(c.eq, bool) and not INT64_MIN <= c.eq <= INT64_MAX:
        raise ApiError(400, "invalid_argument", "invalid filter",
                       fields=[FieldError(field=f"{where}.eq", description="an integer within int64")])
    for bound in ("gte", "gt", "lte", "lt"):
        value = getattr(c, bound)
        if value is not None and not math.isfinite(value):
            raise ApiError(400, "invalid_argument", "invalid filter",
                           fields=[FieldError(field=f"{where}.{bound}", description="a finite number")])
    if c.any_of is not None:
        return rpb.Condition(field=c.field, any_of=rpb.KeywordSet(values=c.any_of))
    if c.eq is not None:
        if isinstance(c.eq, bool):
            return rpb.Condition(field=c.field, flag=c.eq)
        if isinstance(c.eq, int):
            return rpb.Condition(field=c.field, integer=c.eq)
        return rpb.Condition(field=c.field, keyword=c.eq)
    return rpb.Condition(field=c.field, range=rpb.Range(gte=c.gte, gt=c.gt, lte=c.lte, lt=c.lt))


class Mesh:
    """Composes embedding and retrieval for the REST routes; owns the cache, breaker and jobs."""

    def __init__(self, embedding: AsyncEmbeddingClient, retrieval: AsyncRetrievalClient, cache: EmbeddingCache,
                 breaker: CircuitBreaker, embed_share: float) -> None:
        self.embedding = embedding
        self.retrieval = retrieval
        self.cache = cache
        self.breaker = breaker
        self.embed_share = embed_share
        self.jobs: dict[str, api.Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._info = None

    async def model_info(self, deadline: Deadline):
        """The embedding model's Info (cached after the first success)."""
        if self._info is None:
            try:
                self._info = await self.embedding.info(timeout_s=deadline.check())
            except MeshClientError as err:
                raise from_client_error(err) from None
        return self._info

    # ---- search -------------------------------------------------------------------------
    async def _query_vector(self, text: str, deadline: Deadline) -> tuple[list[float] | None, float, bool, str]:
        """(vector or None, embed ms, cache hit, degradation reason)."""
        start = time.perf_counter()
        revision = self._info.revision if self._info is not None else None
        key = cache_key(revision, "query", text) if revision else None
        if key is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                return cached.tolist(), (time.perf_counter() - start) * 1e3, True, ""
        if not self.breaker.allow():
            return None, (time.perf_counter() - start) * 1e3, False, "breaker_open"
        budget = min(deadline.check() * self.embed_share, deadline.remaining())
        try:
            result = await self.embedding.embed([text], "query", timeout_s=max(0.001, budget))
        except (Unavailable, DeadlineExceeded, Overloaded) as err:
            self.breaker.failure()
            return None, (time.perf_counter() - start) * 1e3, False, err.code.name.lower()
        except MeshClientError as err:
            if isinstance(err, InvalidArgument):
                raise from_client_error(err) from None
            self.breaker.failure()
            return None, (time.perf_counter() - start) * 1e3, False, err.code.name.lower()
        self.breaker.success()
        vector = result.vectors[0]
        key = cache_key(result.model_revision, "query", text)
        await self.cache.set(key, vector)
        if self._info is None or self._info.revision != result.model_revision:
            self._info = None  # refreshed on the next call that needs it
        return vector.tolist(), (time.perf_counter() - start) * 1e3, False, ""

    async def search(self, req: api.SearchRequest, deadline: Deadline) -> api.SearchResponse:
        """Embed (cache, breaker, budget share), then retrieve; keyword-only when embedding fails."""
        start = time.perf_counter()
        if self._info is None and self.breaker.allow():
            try:
                self._info = await self.embedding.info(timeout_s=min(0.5, deadline.check() * self.embed_share))
                self.breaker.success()
            except MeshClientError:
                self.breaker.failure()
        vector, embed_ms, cache_hit, reason = (None, 0.0, False, "")
        if req.mode != "keyword":
            with TRACER.start_as_current_span("gateway.query_vector") as span:
                vector, embed_ms, cache_hit, reason = await self._query_vector(req.query, deadline)
                span.set_attributes({"mesh.cache_hit": cache_hit, "mesh.degraded_reason": reason,
                                     "mesh.breaker": self.breaker.state})
        mode = req.mode
        degraded = False
        if vector is None and req.mode != "keyword":
            if req.mode == "dense":
                raise ApiError(503, "unavailable", "dense search needs the embedding service, which is unavailable",
                               retryable=True)
            mode, degraded = "keyword", True
            DEGRADED.labels(reason or "unknown").inc()
        flt = rpb.Filter()
        if req.filter is not None:
            flt = rpb.Filter(must=[_condition(c, f"filter.must[{i}]") for i, c in enumerate(req.filter.must)],
                             must_not=[_condition(c, f"filter.must_not[{i}]")
                                       for i, c in enumerate(req.filter.must_not)])
        request = rpb.SearchRequest(collection=req.collection, query=req.query, top_k=req.top_k, mode=MODES[mode],
                                    filter=flt, query_vector=vector or [])
        t = time.perf_counter()
        try:
            resp = await self.retrieval.search(request, timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None
        retrieval_ms = (time.perf_counter() - t) * 1e3
        note(collection=req.collection, mode=MODE_NAMES[resp.mode], degraded=degraded or resp.degraded,
             degraded_reason=reason if degraded else "", cache_hit=cache_hit, hits=len(resp.hits),
             embed_ms=round(embed_ms, 3), retrieval_ms=round(retrieval_ms, 3),
             model_revision=self._info.revision if self._info is not None else "")
        return api.SearchResponse(
            hits=[api.Hit(id=h.id, score=h.score, text=h.text, payload=_struct(h.payload),
                          dense_rank=h.dense.rank or None, keyword_rank=h.keyword.rank or None) for h in resp.hits],
            mode=MODE_NAMES[resp.mode], degraded=degraded or resp.degraded,
            timings=api.SearchTimings(embed_ms=round(embed_ms, 3), retrieval_ms=round(retrieval_ms, 3),
                                      total_ms=round((time.perf_counter() - start) * 1e3, 3), cache_hit=cache_hit))

    # ---- OpenAI-compatible embeddings -----------------------------------------------------
    async def embeddings(self, req: api.EmbeddingsRequest, deadline: Deadline) -> api.EmbeddingsResponse:
        """Embed texts; base64 is little-endian float32, as the official client expects."""
        info = await self.model_info(deadline)
        kind: Literal["query", "passage"] = "query" if req.model.endswith(":query") else "passage"
        model = req.model.removesuffix(":query")
        if model != info.model_id:
            raise ApiError(404, "not_found", f"model {req.model!r} is not served; GET /v1/models lists them")
        if req.dimensions is not None and req.dimensions != info.dim:
            raise ApiError(400, "invalid_argument", "unsupported dimensions",
                           fields=[FieldError(field="dimensions", description=f"this model has {info.dim}")])
        texts = [req.input] if isinstance(req.input, str) else req.input
        if not 1 <= len(texts) <= 256:
            raise ApiError(400, "invalid_argument", "invalid input",
                           fields=[FieldError(field="input", description="give 1 to 256 texts")])
        try:
            result = await self.embedding.embed(texts, kind, timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None
        data = []
        for i, vec in enumerate(result.vectors):
            emb: list[float] | str = (base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
                                      if req.encoding_format == "base64" else vec.tolist())
            data.append(api.EmbeddingData(index=i, embedding=emb))
        tokens = int(sum(result.token_counts))
        return api.EmbeddingsResponse(data=data, model=req.model, usage=api.Usage(prompt_tokens=tokens,
                                                                                  total_tokens=tokens))

    # ---- collections and jobs -------------------------------------------------------------
    async def create_collection(self, req: api.CollectionCreate, deadline: Deadline) -> api.CollectionInfo:
        """Create a catalog."""
        fields = [rpb.PayloadField(name=n, type=FIELD_TYPES[t]) for n, t in req.fields.items()]
        try:
            resp = await self.retrieval.create_collection(rpb.CreateCollectionRequest(name=req.name, fields=fields),
                                                          timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None
        return _collection(resp.collection)

    async def get_collection(self, name: str, deadline: Deadline) -> api.CollectionInfo:
        """Describe a catalog."""
        try:
            return _collection((await self.retrieval.get_collection(name, timeout_s=deadline.check())).collection)
        except MeshClientError as err:
            raise from_client_error(err) from None

    async def delete_documents(self, name: str, req: api.DeleteRequest, deadline: Deadline) -> int:
        """Remove documents."""
        try:
            return (await self.retrieval.delete(name, req.ids, timeout_s=deadline.check())).requested
        except MeshClientError as err:
            raise from_client_error(err) from None

    def start_ingest(self, name: str, req: api.IngestRequest) -> api.Job:
        """Queue an ingest job; progress is polled with :meth:`job`."""
        job = api.Job(id=uuid.uuid4().hex, kind="ingest", collection=name, state="queued", done=0,
                      total=len(req.documents))
        self.jobs[job.id] = job
        self._spawn(self._run(job, self._ingest(job, req)))
        return job

    def start_reindex(self, name: str) -> api.Job:
        """Queue a reindex job."""
        job = api.Job(id=uuid.uuid4().hex, kind="reindex", collection=name, state="queued", done=0, total=0)
        self.jobs[job.id] = job
        self._spawn(self._run(job, self._reindex(job)))
        return job

    def job(self, job_id: str) -> api.Job:
        """A job by id, or 404."""
        if job_id not in self.jobs:
            raise ApiError(404, "not_found", f"job {job_id!r} does not exist")
        return self.jobs[job_id]

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _run(job: api.Job, work) -> None:
        """Run a job's work; whatever happens, the job ends (succeeded or failed with its reason)."""
        job.state = "running"
        try:
            await work
        except Exception as exc:  # noqa: BLE001 - a job always ends, with its reason; the traceback is logged
            log.exception("%s job %s failed unexpectedly", job.kind, job.id)
            job.state = "failed"
            job.errors.append(f"internal: {type(exc).__name__}")

    async def _ingest(self, job: api.Job, req: api.IngestRequest) -> None:
        docs = req.documents
        batches = []
        for i in range(0, len(docs), req.batch_size):
            out = []
            for d in docs[i:i + req.batch_size]:
                doc = rpb.Document(id=d.id, text=d.text)
                doc.payload.update(d.payload)
                out.append(doc)
            batches.append(rpb.UpsertDocumentsStreamRequest(collection=job.collection, documents=out))
        try:
            async for event in self.retrieval.upsert_stream(batches):
                if event.HasField("progress"):
                    job.done = event.progress.total_upserted
                    if event.progress.error:
                        job.failed_batches += 1
                        job.errors.append(f"batch {event.progress.sequence}: {event.progress.error}")
                else:
                    job.result = {"upserted": event.summary.upserted, "batches": event.summary.batches,
                                  "failed_batches": event.summary.failed_batches}
            job.state = "succeeded" if job.failed_batches == 0 else "failed"
        except MeshClientError as err:
            job.state = "failed"
            job.errors.append(f"{err.code.name}: {err.message}")

    async def _reindex(self, job: api.Job) -> None:
        try:
            async for event in self.retrieval.reindex(job.collection):
                if event.HasField("progress"):
                    job.done, job.total = event.progress.done, event.progress.total
                else:
                    s = event.summary
                    job.result = {"previous_collection": s.previous_collection, "collection": s.collection,
                                  "documents": s.documents, "embedding_revision": s.embedding_revision}
            job.state = "succeeded"
        except MeshClientError as err:
            job.state = "failed"
            job.errors.append(f"{err.code.name}: {err.message}")

    async def close(self) -> None:
        """Cancel jobs, close clients and cache."""
        for task in list(self._tasks):
            task.cancel()
        await self.embedding.close()
        await self.retrieval.close()
        await self.cache.close()


def _struct(s) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(s)


def _collection(c: rpb.CollectionInfo) -> api.CollectionInfo:
    return api.CollectionInfo(name=c.name, collection=c.collection, documents=c.documents,
                              embedding_revision=c.embedding_revision, tokenizer=c.tokenizer,
                              fields={f.name: FIELD_NAMES.get(f.type, "keyword") for f in c.fields})
