"""LLM routes: recommendations (JSON and SSE), chat (SSE), summaries; logic in the feature modules beside."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.reasoning import protocol as api
from gateway.reasoning.chat import Chat
from gateway.reasoning.recommendations import Recommendations
from gateway.reasoning.summaries import Summaries

router = APIRouter(tags=["reasoning"])
ERRORS = documented(400, 401, 404, 409, 413, 429, 503, 504, described=False)
SSE_HEADERS = {"Cache-Control": "no-cache"}


def sse_response(events: AsyncGenerator[bytes, None], headers: dict[str, str] | None = None) -> StreamingResponse:
    """Server-sent ``events`` whose generator is closed once the response ends.

    Also when the client left mid-stream: its ``finally`` blocks (ring slots, RPCs) run then, not
    whenever it is garbage-collected.
    """
    return StreamingResponse(events, media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})},
                             background=BackgroundTask(events.aclose))


def _recommendations(request: Request) -> Recommendations:
    return request.app.state.mesh.recommendations


def _chat(request: Request) -> Chat:
    return request.app.state.mesh.chat


def _summaries(request: Request) -> Summaries:
    return request.app.state.mesh.summaries


@router.post("/v1/recommendations", response_model=api.RecommendResponse, responses=ERRORS)
async def recommend(body: api.RecommendRequest, request: Request, dl: Deadline = deadline.LLM):
    """Search, then one LLM call for every card's short and long reason.

    The reasons degrade (cards without reasons, `reasons_status: failed`) instead of failing the
    request.
    """
    return await _recommendations(request).recommend(body, dl)


@router.post("/v1/recommendations:stream", responses={**ERRORS, **api.RECOMMEND_STREAM.doc()})
async def recommend_stream(body: api.RecommendRequest, request: Request, dl: Deadline = deadline.LLM):
    """Recommendations as server-sent events, in this order.

    1. `cards`: `{"cards": [Card], "search_mode", "degraded"}`, the search result at once (no reasons yet).
    2. `reason`, one per card as soon as the reasoning service has it (a card passes its checks the
       moment its JSON object closes in the LLM's answer; cards that fail follow after their one
       regeneration, so the order is not the cards' order): `{"id", "short", "long", "status",
       "violations"}`, `status` `ok` | `regenerated` | `failed` (`failed`: `short` and `long` empty,
       `violations` the check kinds still broken).
    3. `reasons`: `{"reasons": [...]}`, every `reason` again in the cards' order (kept for clients
       written before the `reason` events).
    4. `done`: `{"reasons_status": "ok", "usage": LlmUsage}`, or `{"reasons_status": "skipped"}`
       right after `cards` when `reasons` is false or nothing was found.

    `error` (the ErrorBody shape) replaces 2-4 when the reasons fail (after any `reason` already sent).
    """
    recommendations = _recommendations(request)
    found = await recommendations.cards(body, dl)  # errors before the stream starts are plain HTTP errors
    return sse_response(recommendations.recommend_events(body, found, dl))


@router.post("/v1/chat", responses={**ERRORS, **api.CHAT_STREAM.doc()})
async def chat(body: api.ChatRequest, request: Request, dl: Deadline = deadline.LLM):
    """One chat turn as server-sent events.

    `delta` events ({"text"}), then `done` ({"finish_reason", "usage"}) or `error` (the ErrorBody
    shape; `error.code` names the kind, e.g. `first_token_timeout`). Routed by `session_id`; the
    instance is named in `X-Mesh-Reasoning-Instance`.
    """
    stream = await _chat(request).chat(body, dl)
    return StreamingResponse(stream.events(), media_type="text/event-stream", background=BackgroundTask(stream.release),
                             headers={**SSE_HEADERS, "X-Mesh-Reasoning-Instance": stream.target})


@router.post("/v1/summaries", response_model=api.SummaryResponse, responses=ERRORS)
async def summarize(body: api.SummaryRequest, request: Request, dl: Deadline = deadline.LLM):
    """A summary within the summary deadline (5 s by default), or `failed: true` with an empty summary."""
    return JSONResponse((await _summaries(request).summarize(body, dl)).model_dump())
