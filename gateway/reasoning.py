"""LLM routes of the REST contract: recommendations (JSON and SSE), chat (SSE), summaries.

A session id is routed to one reasoning instance by consistent hashing with bounded loads, so the
engine behind it keeps the conversation's prefix cached. Every SSE stream ends with an explicit
``done`` or ``error`` event; a client that disconnects cancels the gRPC call, which cancels the
LLM request behind it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from mesh.reasoning.v1 import reasoning_pb2 as pb
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from clients.errors import MeshClientError
from clients.reasoning import AsyncReasoningClient
from gateway import protocol as api
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorBody, from_client_error
from gateway.protocol import Strict
from gateway.routing import BoundedLoadRing
from gateway.serving import Deadline, Mesh, request_deadline
from gateway.telemetry import note

KINDS = {pb.ERROR_KIND_FIRST_TOKEN_TIMEOUT: "first_token_timeout", pb.ERROR_KIND_GENERATION_TIMEOUT:
         "generation_timeout", pb.ERROR_KIND_TOTAL_TIMEOUT: "total_timeout",
         pb.ERROR_KIND_BACKEND_FAILED: "backend_failed", pb.ERROR_KIND_SCHEMA_VIOLATION: "schema_violation"}
FINISH = {pb.FINISH_REASON_STOP: "stop", pb.FINISH_REASON_LENGTH: "length"}
ERRORS: dict[int | str, dict] = {code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 429, 503, 504)}
SSE_DOC: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                 "description": "Server-sent events; the last event is `done` or `error`."}}


class Reasoning:
    """Clients of every reasoning instance and the session ring over them."""

    def __init__(self, settings: GatewaySettings) -> None:
        targets = [t.strip() for t in settings.reasoning_targets.split(",") if t.strip()]
        self.clients = {t: AsyncReasoningClient(t) for t in targets}
        self.ring = BoundedLoadRing(targets, epsilon=settings.reasoning_load_epsilon)
        self.settings = settings

    def timeouts(self, deadline: Deadline) -> pb.Timeouts:
        """The stage deadlines of a call, bounded by what is left of the request's deadline."""
        left = deadline.check()
        s = self.settings
        return pb.Timeouts(first_token_s=min(s.reasoning_first_token_s, left),
                           generation_s=min(s.reasoning_generation_s, left), total_s=min(s.reasoning_total_s, left))

    async def close(self) -> None:
        """Close every channel."""
        for client in self.clients.values():
            await client.close()


# ---- REST models -----------------------------------------------------------------------------


class LlmUsage(BaseModel):
    """Accounting of the LLM work behind a response."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float
    total_ms: float
    tokens_per_second: float
    cost_usd: float
    backend: str
    model: str
    estimated: bool = Field(description="token counts estimated (the backend reported none)")
    instance: str = Field(description="the reasoning instance that served the call")


class RecommendRequest(Strict):
    """Search a catalog, then explain every card in one LLM call."""

    collection: str = Field(min_length=1, max_length=64, examples=["demo"])
    query: str = Field(min_length=1, max_length=500, examples=["부모님께 드릴 선물 추천"])
    top_k: int = Field(5, ge=1, le=20)
    filter: api.SearchFilter | None = None
    reasons: bool = Field(True, description="write reasons (false: cards only)")
    session_id: str | None = Field(None, max_length=128, description="routes to the same reasoning instance")


class Card(BaseModel):
    """A recommended item and why."""

    id: str
    score: float
    text: str
    payload: dict[str, Any]
    reason_short: str | None
    reason_long: str | None


class RecommendResponse(BaseModel):
    """Cards best first.

    ``reasons_status`` is ``failed`` (with ``reasons_error``) when the LLM could not answer in time:
    the cards are still the search result.
    """

    cards: list[Card]
    search_mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    reasons_status: Literal["ok", "skipped", "failed"]
    reasons_error: str | None = None
    usage: LlmUsage | None = None


class ChatMessage(Strict):
    """An earlier turn."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=20000)


class ChatRequest(Strict):
    """One chat turn; history is append-only and sent back by the caller each turn."""

    session_id: str = Field(min_length=1, max_length=128, description="routes every turn to one instance")
    message: str = Field(min_length=1, max_length=20000)
    system: str = Field("", max_length=20000, description="keep it identical across turns (prefix cache)")
    history: list[ChatMessage] = Field(default_factory=list, max_length=200)
    max_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float | None = Field(None, ge=0, le=2)


class SummaryRequest(Strict):
    """A text to summarise (5 s deadline by default, never retried)."""

    text: str = Field(min_length=1, max_length=20000)
    max_sentences: int = Field(3, ge=1, le=10)
    session_id: str | None = Field(None, max_length=128)


class SummaryResponse(BaseModel):
    """The summary, or ``failed`` with an empty summary."""

    summary: str
    failed: bool
    failure_reason: str | None = None
    usage: LlmUsage | None = None


def usage_of(u: pb.Usage) -> LlmUsage:
    """Proto usage -> REST (and its figures into the request's access line and span)."""
    note(ttft_ms=round(u.ttft_ns / 1e6, 2), tokens_in=u.prompt_tokens, tokens_out=u.completion_tokens,
         llm_backend=u.backend, llm_instance=u.instance, tokens_estimated=u.estimated)
    return LlmUsage(llm_calls=u.llm_calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                    ttft_ms=round(u.ttft_ns / 1e6, 2), total_ms=round(u.total_ns / 1e6, 2),
                    tokens_per_second=round(u.tokens_per_second, 2), cost_usd=u.cost_usd, backend=u.backend,
                    model=u.model, estimated=u.estimated, instance=u.instance)


def sse(event: str, data: dict) -> bytes:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def error_data(err: ApiError) -> dict:
    """An error event's data: the ErrorBody shape every route uses."""
    return err.body.model_dump()


router = APIRouter(tags=["reasoning"])


def _parts(request: Request) -> tuple[Mesh, Reasoning, GatewaySettings]:
    return request.app.state.mesh, request.app.state.reasoning, request.app.state.settings


async def _cards(mesh: Mesh, body: RecommendRequest, dl: Deadline) -> api.SearchResponse:
    return await mesh.search(api.SearchRequest(collection=body.collection, query=body.query, top_k=body.top_k,
                                               filter=body.filter), dl)


def _reasons_request(body: RecommendRequest, found: api.SearchResponse, timeouts: pb.Timeouts):
    items = [pb.Item(id=h.id, title=h.text[:300], description=", ".join(
        f"{k}: {v}" for k, v in h.payload.items() if isinstance(v, str | int | float))[:300]) for h in found.hits]
    return pb.GenerateReasonsRequest(query=body.query, items=items, options=pb.Options(timeouts=timeouts))


def _card_list(found: api.SearchResponse, reasons: dict[str, pb.Reason]) -> list[Card]:
    return [Card(id=h.id, score=h.score, text=h.text, payload=h.payload,
                 reason_short=reasons[h.id].short if h.id in reasons else None,
                 reason_long=reasons[h.id].long if h.id in reasons else None) for h in found.hits]


@router.post("/v1/recommendations", response_model=RecommendResponse, responses=ERRORS)
async def recommend(body: RecommendRequest, request: Request):
    """Search, then one LLM call for every card's short and long reason.

    The reasons degrade (cards without reasons, `reasons_status: failed`) instead of failing the
    request.
    """
    mesh, reasoning, settings = _parts(request)
    dl = request_deadline(request, settings.reasoning_timeout_ms)
    found = await _cards(mesh, body, dl)
    if not body.reasons or not found.hits:
        return RecommendResponse(cards=_card_list(found, {}), search_mode=found.mode, degraded=found.degraded,
                                 reasons_status="skipped")
    with reasoning.ring.hold(body.session_id or body.query) as target:
        try:
            resp = await reasoning.clients[target].reasons(_reasons_request(body, found, reasoning.timeouts(dl)),
                                                           timeout_s=dl.check())
        except MeshClientError as err:
            return RecommendResponse(cards=_card_list(found, {}), search_mode=found.mode, degraded=found.degraded,
                                     reasons_status="failed", reasons_error=f"{err.code.name}: {err.message}")
    return RecommendResponse(cards=_card_list(found, {r.item_id: r for r in resp.reasons}), search_mode=found.mode,
                             degraded=found.degraded, reasons_status="ok", usage=usage_of(resp.usage))


@router.post("/v1/recommendations:stream", responses={**ERRORS, **SSE_DOC})
async def recommend_stream(body: RecommendRequest, request: Request):
    """Recommendations as server-sent events.

    `cards` (the search result, at once), then `reasons` (one event with every reason), then `done`;
    or `error` after `cards` when the reasons fail.
    """
    mesh, reasoning, settings = _parts(request)
    dl = request_deadline(request, settings.reasoning_timeout_ms)
    found = await _cards(mesh, body, dl)  # errors before the stream starts are plain HTTP errors

    async def events() -> AsyncIterator[bytes]:
        yield sse("cards", {"cards": [c.model_dump() for c in _card_list(found, {})], "search_mode": found.mode,
                            "degraded": found.degraded})
        if not body.reasons or not found.hits:
            yield sse("done", {"reasons_status": "skipped"})
            return
        with reasoning.ring.hold(body.session_id or body.query) as target:
            try:
                resp = await reasoning.clients[target].reasons(_reasons_request(body, found, reasoning.timeouts(dl)),
                                                               timeout_s=dl.check())
            except (MeshClientError, ApiError) as err:
                api_err = err if isinstance(err, ApiError) else from_client_error(err)
                yield sse("error", error_data(api_err))
                return
        yield sse("reasons", {"reasons": [{"id": r.item_id, "short": r.short, "long": r.long} for r in resp.reasons]})
        yield sse("done", {"reasons_status": "ok", "usage": usage_of(resp.usage).model_dump()})

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@router.post("/v1/chat", responses={**ERRORS, **SSE_DOC})
async def chat(body: ChatRequest, request: Request):
    """One chat turn as server-sent events.

    `delta` events ({"text"}), then `done` ({"finish_reason", "usage"}) or `error` (the ErrorBody
    shape; `error.code` names the kind, e.g. `first_token_timeout`). Routed by `session_id`; the
    instance is named in `X-Mesh-Reasoning-Instance`.
    """
    _, reasoning, settings = _parts(request)
    dl = request_deadline(request, settings.reasoning_timeout_ms)
    roles = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
    options = pb.Options(max_tokens=body.max_tokens or 0, timeouts=reasoning.timeouts(dl))
    if body.temperature is not None:
        options.temperature = body.temperature
    req = pb.ChatRequest(system=body.system, message=body.message, session_id=body.session_id, options=options,
                         history=[pb.Message(role=roles[m.role], content=m.content) for m in body.history])
    hold = reasoning.ring.hold(body.session_id)
    target = hold.__enter__()
    stream = reasoning.clients[target].chat(req, timeout_s=dl.check())
    released = False

    async def release() -> None:
        """Close the stream and free the ring slot, once (also runs if the body never starts)."""
        nonlocal released
        if not released:
            released = True
            await stream.aclose()  # type: ignore[attr-defined]
            hold.__exit__(None, None, None)

    try:
        first = await anext(stream)  # bad input and unreachable services are plain HTTP errors
    except MeshClientError as err:
        await release()
        raise from_client_error(err) from None
    except StopAsyncIteration:
        await release()
        raise ApiError(503, "unavailable", "the reasoning stream ended without an event", retryable=True) from None

    async def events() -> AsyncIterator[bytes]:
        try:
            event = first
            while True:
                kind = event.WhichOneof("event")
                if kind == "delta":
                    yield sse("delta", {"text": event.delta})
                elif kind == "done":
                    yield sse("done", {"finish_reason": FINISH.get(event.done.finish_reason, "stop"),
                                       "usage": usage_of(event.done.usage).model_dump()})
                    return
                else:
                    err = event.error
                    status = 504 if KINDS.get(err.kind, "").endswith("timeout") else 503
                    yield sse("error", error_data(ApiError(status, KINDS.get(err.kind, "backend_failed"),
                                                           err.message, retryable=True)))
                    return
                try:
                    event = await anext(stream)
                except StopAsyncIteration:
                    yield sse("error", error_data(ApiError(503, "unavailable", "stream ended without done",
                                                           retryable=True)))
                    return
                except MeshClientError as err:
                    yield sse("error", error_data(from_client_error(err)))
                    return
        finally:
            await release()

    return StreamingResponse(events(), media_type="text/event-stream", background=BackgroundTask(release),
                             headers={"Cache-Control": "no-cache", "X-Mesh-Reasoning-Instance": target})


@router.post("/v1/summaries", response_model=SummaryResponse, responses=ERRORS)
async def summarize(body: SummaryRequest, request: Request):
    """A summary within the summary deadline (5 s by default), or `failed: true` with an empty summary."""
    _, reasoning, settings = _parts(request)
    dl = request_deadline(request, settings.reasoning_timeout_ms)
    key = body.session_id or uuid.uuid5(uuid.NAMESPACE_OID, body.text[:200]).hex
    with reasoning.ring.hold(key) as target:
        total = min(settings.summary_timeout_s, dl.check())
        req = pb.SummarizeRequest(text=body.text, max_sentences=body.max_sentences, options=pb.Options(
            timeouts=pb.Timeouts(total_s=total, first_token_s=total, generation_s=total)))
        start = time.perf_counter()
        try:
            resp = await reasoning.clients[target].summarize(req, timeout_s=total + 1.0)
        except MeshClientError as err:
            if err.code.name in ("INVALID_ARGUMENT",):
                raise from_client_error(err) from None
            return SummaryResponse(summary="", failed=True, failure_reason=f"{err.code.name}: {err.message} "
                                   f"after {(time.perf_counter() - start) * 1e3:.0f} ms")
    return JSONResponse(SummaryResponse(summary=resp.summary, failed=resp.failed,
                                        failure_reason=resp.failure_reason or None,
                                        usage=usage_of(resp.usage)).model_dump())
