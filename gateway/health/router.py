"""Liveness, readiness (every dependency through the clients) and Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.health import models as api
from gateway.health.readiness import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=api.Health)
async def healthz():
    """Liveness: the process answers."""
    return api.Health(status="ok")


@router.get("/readyz", response_model=api.Health, responses={503: {"model": api.Health}})
async def readyz(request: Request):
    """Readiness: retrieval must serve; OCR and reasoning are reported, not required.

    Search can degrade without embedding, so embedding down is `degraded`, not unavailable.
    """
    mesh = request.app.state.mesh
    clients = mesh.clients
    body, ready = await readiness(clients.embedding, clients.retrieval, clients.ocr, clients.reasoning,
                                  mesh.vectors.cache)
    return body if ready else JSONResponse(body.model_dump(), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics():
    """Prometheus metrics (rendered off the event loop: every label set of every metric is read)."""
    return PlainTextResponse((await asyncio.to_thread(generate_latest)).decode(), media_type=CONTENT_TYPE_LATEST)
