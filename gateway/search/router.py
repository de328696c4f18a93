"""``POST /v1/search``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.search import protocol as api

router = APIRouter(tags=["search"])
ERRORS = documented(400, 401, 404, 409, 413, 422, 429, 499, 503, 504)


@router.post("/v1/search", response_model=api.SearchResponse, responses=ERRORS)
async def search(body: api.SearchRequest, request: Request, dl: Deadline = deadline.SEARCH):
    """Hybrid search; keyword-only (and `degraded`) when the query cannot be embedded in time."""
    out = await request.app.state.mesh.search.search(body, dl)
    return JSONResponse(out.model_dump(exclude_none=False), headers={
        "X-Mesh-Degraded": "1" if out.degraded else "0", "X-Mesh-Cache": "hit" if out.timings.cache_hit else "miss"})
