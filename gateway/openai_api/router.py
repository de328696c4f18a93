"""OpenAI-compatible routes: the official ``openai`` client works against the gateway's base URL."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.disconnect import while_connected
from gateway.http.errors import documented
from gateway.openai_api import chat_protocol as chat
from gateway.openai_api import protocol as api
from gateway.openai_api.completions import ChatCompletions
from gateway.openai_api.serving import OpenAiCompat, rendered

router = APIRouter(tags=["openai"])
ERRORS = documented(400, 401, 404, 409, 413, 422, 429, 499, 503, 504)
CHAT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {}, **chat.STREAM.doc()[200]["content"]},
          "description": "`chat.completion`, or with `stream: true` `chat.completion.chunk` events ending in "
                         "`data: [DONE]` (a failure after the start: one `data: {\"error\": ...}` line instead)"},
    **{code: {"model": chat.OpenAiError, "description": why} for code, why in {
        400: "invalid or unsupported field (`error.param` names it; `context_length_exceeded`)",
        401: "missing or wrong API key", 404: "`model_not_found`: not a model route", 413: "request body too large",
        429: "overloaded; retry after `Retry-After`", 502: "the model's answer broke its schema twice",
        503: "no reasoning instance or backend answered", 504: "a stage deadline passed"}.items()}}


def _compat(request: Request) -> OpenAiCompat:
    return request.app.state.mesh.openai


def _completions(request: Request) -> ChatCompletions:
    return request.app.state.mesh.completions


@router.post("/v1/chat/completions", response_model=chat.ChatCompletion, responses=CHAT_RESPONSES)
async def chat_completions(body: chat.ChatCompletionRequest, request: Request, dl: Deadline = deadline.LLM,
                           x_session_id: str | None = Header(None, max_length=128)):
    """OpenAI-compatible chat completions on a model route (`model`; GET /v1/models lists them).

    `response_format` (`json_object`, `json_schema`) and `tools` / `tool_choice` are decoded under a
    schema and validated; an answer that does not validate is an error, never a success. `user` or
    `X-Session-ID` keeps a conversation on one reasoning instance (named in `X-Mesh-Reasoning-Instance`).
    Errors have OpenAI's shape.
    """
    if body.stream:
        stream = await _completions(request).open(body, dl, x_session_id)
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(stream.chunks(include_usage), media_type="text/event-stream",
                                 background=BackgroundTask(stream.release),
                                 headers={"Cache-Control": "no-cache", "X-Mesh-Reasoning-Instance": stream.target})

    async def answer() -> tuple[str, chat.ChatCompletion]:
        whole = await _completions(request).open(body, dl, x_session_id)  # buffered: the first event is the end
        return whole.target, await whole.whole()

    target, completion = await while_connected(request, answer())  # the client gone: the generation stops
    return JSONResponse(completion.model_dump(), headers={"X-Mesh-Reasoning-Instance": target})


@router.post("/v1/embeddings", response_model=api.EmbeddingsResponse, responses=ERRORS)
async def embeddings(body: api.EmbeddingsRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """OpenAI-compatible embeddings (float or base64)."""
    out = await _compat(request).embeddings(body, dl)
    return Response(await rendered(out), media_type="application/json")


@router.get("/v1/models", response_model=api.ModelList, responses=ERRORS)
async def models(request: Request, dl: Deadline = deadline.ADMIN):
    """OpenAI-compatible model list."""
    return await _compat(request).models(dl)


@router.get("/v1/models/{model_id:path}", response_model=api.ModelCard, responses=documented(400, 401, 404, 503, 504))
async def model(model_id: str, request: Request, dl: Deadline = deadline.ADMIN):
    """One model (what the official client's `models.retrieve` asks for)."""
    return await _compat(request).model(model_id, dl)
