"""OpenAI-compatible routes: the official ``openai`` client works against the gateway's base URL."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.openai_api import protocol as api
from gateway.openai_api.serving import OpenAiCompat

router = APIRouter(tags=["openai"])
ERRORS = documented(400, 401, 404, 409, 413, 422, 429, 499, 503, 504)


def _compat(request: Request) -> OpenAiCompat:
    return request.app.state.mesh.openai


@router.post("/v1/embeddings", response_model=api.EmbeddingsResponse, responses=ERRORS)
async def embeddings(body: api.EmbeddingsRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """OpenAI-compatible embeddings (float or base64)."""
    return await _compat(request).embeddings(body, dl)


@router.get("/v1/models", response_model=api.ModelList, responses=ERRORS)
async def models(request: Request, dl: Deadline = deadline.ADMIN):
    """OpenAI-compatible model list."""
    return await _compat(request).models(dl)


@router.get("/v1/models/{model_id:path}", response_model=api.ModelCard, responses=documented(400, 401, 404, 503, 504))
async def model(model_id: str, request: Request, dl: Deadline = deadline.ADMIN):
    """One model (what the official client's `models.retrieve` asks for)."""
    return await _compat(request).model(model_id, dl)
