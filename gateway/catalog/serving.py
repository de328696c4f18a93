"""Collections, documents and their jobs over the retrieval client; ingest and reindex run as durable jobs.

The jobs' work is :class:`gateway.catalog.jobs.CatalogJobs` (the handlers the job store runs); this
module submits, reads and cancels them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from clients.retrieval import AsyncRetrievalClient, Collection
from gateway.access.context import caller, owner, owns, require_read, require_write
from gateway.catalog import protocol as api
from gateway.catalog.jobs import gate_args
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, job_submit_error
from services.runtime.jobs import JobNotFound, JobRecord, Jobs, JobStoreUnavailable, QueueFull


def collection_info(c: Collection) -> api.CollectionInfo:
    """The REST view of a collection."""
    return api.CollectionInfo(name=c.name, collection=c.collection, documents=c.documents,
                              embedding_revision=c.embedding_revision, tokenizer=c.tokenizer, fields=dict(c.fields),
                              layout=c.layout, previous_collection=c.previous_collection or None,
                              previous_embedding_revision=c.previous_embedding_revision or None,
                              rollback_until=c.rollback_until or None)


CATALOG_KINDS = ("ingest", "reindex", "file")  # the jobs /v1/jobs shows (the job store runs others too)


def job_view(r: JobRecord) -> api.Job:
    """The REST view of a job record (a file stored in a collection is an ``ingest``)."""
    kind = "ingest" if r.kind == "file" else r.kind
    return api.Job(id=r.id, kind=kind, collection=r.subject, state=r.state, done=r.done,  # type: ignore[arg-type]
                   total=r.total, failed_batches=r.failed_batches, errors=r.errors, result=r.result)


class Catalog:
    """Collections and documents; ingest and reindex as jobs any gateway instance can run, read or cancel."""

    def __init__(self, retrieval: AsyncRetrievalClient, jobs: Jobs) -> None:
        self.retrieval = retrieval
        self.jobs = jobs
        # Told the ids of deleted documents (the files feature drops what it kept about them).
        self.on_delete: list[Callable[[str, list[str]], Awaitable[None]]] = []
        # Told the name of a collection whose data a call changed (the answer cache starts a new generation).
        self.on_change: list[Callable[[str], Awaitable[None]]] = []

    async def _changed(self, name: str) -> None:
        for hook in self.on_change:
            await hook(name)

    # ---- collections ---------------------------------------------------------------------------
    async def create(self, req: api.CollectionCreate, deadline: Deadline) -> api.CollectionInfo:
        """Create a collection."""
        require_write(req.name)
        await self._changed(req.name)  # a name used before starts afresh
        return collection_info(await self.retrieval.create_collection(req.name, req.fields,  # type: ignore[arg-type]
                                                                      timeout_s=deadline.check()))

    async def get(self, name: str, deadline: Deadline) -> api.CollectionInfo:
        """Describe a collection."""
        require_read(name)
        return collection_info(await self.retrieval.get_collection(name, timeout_s=deadline.check()))

    async def list_all(self, deadline: Deadline) -> api.CollectionList:
        """Every collection the caller may read."""
        found = await self.retrieval.list_collections(timeout_s=deadline.check())
        me = caller()
        return api.CollectionList(collections=[collection_info(c) for c in found if me.may_read(c.name)])

    async def delete(self, name: str, deadline: Deadline) -> api.CollectionDeleted:
        """Remove a collection and its data."""
        require_write(name)
        collection, documents = await self.retrieval.delete_collection(name, timeout_s=deadline.check())
        await self._changed(name)
        return api.CollectionDeleted(name=name, collection=collection, documents=documents)

    async def delete_documents(self, name: str, req: api.DeleteRequest, deadline: Deadline) -> dict[str, int]:
        """Remove documents by id."""
        require_write(name)
        out = {"requested": await self.retrieval.delete(name, req.ids, timeout_s=deadline.check())}
        await self._changed(name)
        for hook in self.on_delete:
            await hook(name, req.ids)
        return out

    # ---- jobs ----------------------------------------------------------------------------------
    async def submit(self, kind: str, name: str, payload: bytes, total: int, deadline: Deadline) -> api.Job:
        """Queue a job of ``kind`` on collection ``name`` (404 now when it does not exist, 429 when full).

        The job belongs to the caller's key: another key reads or cancels it as one that does not exist.
        """
        require_write(name)
        await self.retrieval.get_collection(name, timeout_s=deadline.check())  # a missing collection is 404 now
        await self._changed(name)
        try:
            return job_view(await self.jobs.submit(kind, name, payload, total=total, meta={"owner": owner()}))
        except (QueueFull, JobStoreUnavailable) as err:
            raise job_submit_error(err) from None

    async def start_ingest(self, name: str, req: api.IngestRequest, deadline: Deadline) -> api.Job:
        """Queue an ingest job (404 at once when the collection does not exist)."""
        payload = json.dumps({"batch_size": req.batch_size, "documents": [d.model_dump() for d in req.documents]},
                             ensure_ascii=False).encode()
        return await self.submit("ingest", name, payload, len(req.documents), deadline)

    async def start_reindex(self, name: str, deadline: Deadline) -> api.Job:
        """Queue a reindex job."""
        return await self.submit("reindex", name, b"{}", 0, deadline)

    async def start_upgrade(self, name: str, req: api.UpgradeRequest, deadline: Deadline) -> api.Job:
        """Queue a reindex to another embedding revision; the request is checked by retrieval first.

        A revision no embedding instance serves, or a gate naming documents the collection does not
        hold, is a 400 now rather than a failed job.
        """
        require_write(name)
        gate = gate_args(req.gate)
        async for _ in self.retrieval.reindex(name, req.batch_size, timeout_s=deadline.check(), validate_only=True,
                                              embedding_revision=req.embedding_revision, **gate):
            pass
        payload = json.dumps({"embedding_revision": req.embedding_revision, "batch_size": req.batch_size,
                              "grace_s": req.grace_s or 0.0, "gate": req.gate.model_dump() if req.gate else None},
                             ensure_ascii=False).encode()
        return await self.submit("reindex", name, payload, 0, deadline)

    async def rollback(self, name: str, deadline: Deadline) -> api.RollbackResponse:
        """Point a collection back at the version its last upgrade replaced (409 when there is none)."""
        require_write(name)
        start = time.perf_counter()
        collection, removed = await self.retrieval.rollback(name, timeout_s=deadline.check())
        await self._changed(name)
        return api.RollbackResponse(collection=collection_info(collection), removed_collection=removed,
                                    took_ms=round((time.perf_counter() - start) * 1e3, 3))

    async def job(self, job_id: str) -> api.Job:
        """A job by id, whichever instance runs it; 404 when unknown or expired, or not a collection's job."""
        await self._catalog_only(job_id)
        return await self._job_call(job_id, self.jobs.get(job_id))

    async def cancel(self, job_id: str) -> api.Job:
        """Cancel a job: a queued one ends now, a running one after its current batch."""
        await self._catalog_only(job_id)
        return await self._job_call(job_id, self.jobs.cancel(job_id))

    async def _catalog_only(self, job_id: str) -> None:
        """404 for a job that is no collection's, or another key's.

        A conversation's lists are read on their own route; another key's job is answered as one that
        does not exist.
        """
        try:
            record = await self.jobs.get(job_id)
        except (JobNotFound, JobStoreUnavailable):
            return  # said by the call itself
        if not owns(record.meta.get("owner")):
            raise ApiError(404, "not_found", f"job {job_id!r} does not exist (or expired)")
        if record.kind not in CATALOG_KINDS:
            raise ApiError(404, "not_found", f"job {job_id!r} is not a collection's job (a conversation's lists are "
                                             "read at /v1/conversations/{id}/lists/{job_id})")

    @staticmethod
    async def _job_call(job_id: str, call: Awaitable[JobRecord]) -> api.Job:
        try:
            return job_view(await call)
        except JobNotFound:
            raise ApiError(404, "not_found", f"job {job_id!r} does not exist (or expired)") from None
        except JobStoreUnavailable as err:
            raise ApiError(503, "unavailable", str(err), retryable=True) from None
