"""Collections, documents and jobs: each route hands its body to :class:`gateway.catalog.serving.Catalog`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.catalog import protocol as api
from gateway.catalog.serving import Catalog
from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented

router = APIRouter()
ERRORS = documented(400, 401, 404, 409, 413, 422, 429, 499, 503, 504)
NEW_ERRORS = documented(400, 401, 404, 409, 413, 429, 503, 504)  # operations added after v1's freeze


def _catalog(request: Request) -> Catalog:
    return request.app.state.mesh.catalog


@router.post("/v1/collections", response_model=api.CollectionInfo, status_code=201, responses=ERRORS,
             tags=["collections"])
async def create_collection(body: api.CollectionCreate, request: Request, dl: Deadline = deadline.ADMIN):
    """Create a catalog with its filterable fields."""
    return await _catalog(request).create(body, dl)


@router.get("/v1/collections", response_model=api.CollectionList, responses=NEW_ERRORS, tags=["collections"])
async def list_collections(request: Request, dl: Deadline = deadline.ADMIN):
    """Every catalog, by name."""
    return await _catalog(request).list_all(dl)


@router.get("/v1/collections/{name}", response_model=api.CollectionInfo, responses=ERRORS, tags=["collections"])
async def get_collection(name: str, request: Request, dl: Deadline = deadline.ADMIN):
    """Describe a catalog (documents, revisions, fields)."""
    return await _catalog(request).get(name, dl)


@router.delete("/v1/collections/{name}", response_model=api.CollectionDeleted, responses=NEW_ERRORS,
               tags=["collections"])
async def delete_collection(name: str, request: Request, dl: Deadline = deadline.ADMIN):
    """Remove a catalog and all its documents (409 while it is being reindexed)."""
    return await _catalog(request).delete(name, dl)


@router.post("/v1/collections/{name}/documents", response_model=api.Job, status_code=202, responses=ERRORS,
             tags=["collections"])
async def ingest(name: str, body: api.IngestRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Upsert documents as a background job; poll `GET /v1/jobs/{id}`."""
    return await _catalog(request).start_ingest(name, body, dl)


@router.post("/v1/collections/{name}/documents:delete", response_model=dict[str, int], responses=ERRORS,
             tags=["collections"])
async def delete_documents(name: str, body: api.DeleteRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Remove documents by id."""
    return await _catalog(request).delete_documents(name, body, dl)


@router.post("/v1/collections/{name}/reindex", response_model=api.Job, status_code=202, responses=ERRORS,
             tags=["collections"])
async def reindex(name: str, request: Request, dl: Deadline = deadline.ADMIN):
    """Re-embed everything into a new collection and swap the alias, as a job."""
    return await _catalog(request).start_reindex(name, dl)


@router.post("/v1/collections/{name}/upgrade", response_model=api.Job, status_code=202, responses=NEW_ERRORS,
             tags=["collections"])
async def upgrade(name: str, body: api.UpgradeRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Rebuild with another embedding model revision while the current version serves, as a job.

    Searches keep using the revision each version was built with, so dense search never stops. Before
    the swap the optional quality gate runs its judged queries on both versions: the swap happens only
    when the new version's recall@10 and nDCG@10 are each at least the old one's minus `margin`;
    otherwise the job ends `failed` with both figures in `result.gate` and the old version keeps
    serving. The replaced version is kept (and written along) for a rollback during the grace period.
    400 for a revision no embedding instance serves or a gate naming documents the collection lacks.
    """
    return await _catalog(request).start_upgrade(name, body, dl)


@router.post("/v1/collections/{name}/rollback", response_model=api.RollbackResponse, responses=NEW_ERRORS,
             tags=["collections"])
async def rollback(name: str, request: Request, dl: Deadline = deadline.ADMIN):
    """Point the collection back at the version its last upgrade replaced, at once, without re-embedding.

    409 when there is nothing to roll back to (no upgrade kept a version, or its grace period ended).
    """
    return await _catalog(request).rollback(name, dl)


@router.get("/v1/jobs/{job_id}", response_model=api.Job, responses=ERRORS, tags=["jobs"])
async def job(job_id: str, request: Request):
    """A job's state and progress."""
    return await _catalog(request).job(job_id)


@router.post("/v1/jobs/{job_id}:cancel", response_model=api.Job, responses=NEW_ERRORS, tags=["jobs"])
async def cancel_job(job_id: str, request: Request):
    """Cancel a job: a queued one ends now, a running one after its current batch (state `failed`)."""
    return await _catalog(request).cancel(job_id)
