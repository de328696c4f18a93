"""Collections, documents and their jobs over the retrieval client; ingest and reindex run as durable jobs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

from clients.errors import MeshClientError
from clients.retrieval import AsyncRetrievalClient, BatchWritten, Collection, Document, ReindexProgress
from gateway.catalog import protocol as api
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from services.runtime.jobs import JobContext, JobNotFound, JobRecord, Jobs, JobStoreUnavailable, QueueFull


def collection_info(c: Collection) -> api.CollectionInfo:
    """The REST view of a collection."""
    return api.CollectionInfo(name=c.name, collection=c.collection, documents=c.documents,
                              embedding_revision=c.embedding_revision, tokenizer=c.tokenizer, fields=dict(c.fields))


def job_view(r: JobRecord) -> api.Job:
    """The REST view of a job record."""
    return api.Job(id=r.id, kind=r.kind, collection=r.subject, state=r.state, done=r.done,  # type: ignore[arg-type]
                   total=r.total, failed_batches=r.failed_batches, errors=r.errors, result=r.result)


class Catalog:
    """Collections and documents; ingest and reindex as jobs any gateway instance can run, read or cancel."""

    def __init__(self, retrieval: AsyncRetrievalClient) -> None:
        self.retrieval = retrieval
        self.jobs: Jobs | None = None  # set by the wiring (the job store needs our handlers first)

    def handlers(self) -> dict[str, Any]:
        """The job kinds this feature runs."""
        return {"ingest": self._ingest, "reindex": self._reindex}

    # ---- collections ---------------------------------------------------------------------------
    async def create(self, req: api.CollectionCreate, deadline: Deadline) -> api.CollectionInfo:
        """Create a collection."""
        return collection_info(await self.retrieval.create_collection(req.name, req.fields,  # type: ignore[arg-type]
                                                                      timeout_s=deadline.check()))

    async def get(self, name: str, deadline: Deadline) -> api.CollectionInfo:
        """Describe a collection."""
        return collection_info(await self.retrieval.get_collection(name, timeout_s=deadline.check()))

    async def list_all(self, deadline: Deadline) -> api.CollectionList:
        """Every collection."""
        found = await self.retrieval.list_collections(timeout_s=deadline.check())
        return api.CollectionList(collections=[collection_info(c) for c in found])

    async def delete(self, name: str, deadline: Deadline) -> api.CollectionDeleted:
        """Remove a collection and its data."""
        collection, documents = await self.retrieval.delete_collection(name, timeout_s=deadline.check())
        return api.CollectionDeleted(name=name, collection=collection, documents=documents)

    async def delete_documents(self, name: str, req: api.DeleteRequest, deadline: Deadline) -> dict[str, int]:
        """Remove documents by id."""
        return {"requested": await self.retrieval.delete(name, req.ids, timeout_s=deadline.check())}

    # ---- jobs ----------------------------------------------------------------------------------
    async def _submit(self, kind: str, name: str, payload: bytes, total: int, deadline: Deadline) -> api.Job:
        await self.retrieval.get_collection(name, timeout_s=deadline.check())  # a missing collection is 404 now
        assert self.jobs is not None
        try:
            return job_view(await self.jobs.submit(kind, name, payload, total=total))
        except QueueFull as err:
            raise ApiError(429, "resource_exhausted", str(err), retryable=True, retry_after_s=5.0) from None
        except JobStoreUnavailable as err:
            raise ApiError(503, "unavailable", str(err), retryable=True) from None

    async def start_ingest(self, name: str, req: api.IngestRequest, deadline: Deadline) -> api.Job:
        """Queue an ingest job (404 at once when the collection does not exist)."""
        payload = json.dumps({"batch_size": req.batch_size, "documents": [d.model_dump() for d in req.documents]},
                             ensure_ascii=False).encode()
        return await self._submit("ingest", name, payload, len(req.documents), deadline)

    async def start_reindex(self, name: str, deadline: Deadline) -> api.Job:
        """Queue a reindex job."""
        return await self._submit("reindex", name, b"{}", 0, deadline)

    async def job(self, job_id: str) -> api.Job:
        """A job by id, whichever instance runs it; 404 when unknown or expired."""
        assert self.jobs is not None
        return await self._job_call(job_id, self.jobs.get(job_id))

    async def cancel(self, job_id: str) -> api.Job:
        """Cancel a job: a queued one ends now, a running one after its current batch."""
        assert self.jobs is not None
        return await self._job_call(job_id, self.jobs.cancel(job_id))

    @staticmethod
    async def _job_call(job_id: str, call: Awaitable[JobRecord]) -> api.Job:
        try:
            return job_view(await call)
        except JobNotFound:
            raise ApiError(404, "not_found", f"job {job_id!r} does not exist (or expired)") from None
        except JobStoreUnavailable as err:
            raise ApiError(503, "unavailable", str(err), retryable=True) from None

    # ---- job handlers (run on whichever instance took the job) ---------------------------------
    async def _ingest(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any]:
        """Send the batches not yet acknowledged (a resumed job continues where it stopped)."""
        work = json.loads(payload)
        docs = [Document(d["id"], d["text"], d.get("payload") or {}) for d in work["documents"]]
        size = work["batch_size"]
        batches = [docs[i:i + size] for i in range(0, len(docs), size)]
        first = record.resume  # batches before this one were acknowledged by an earlier attempt
        upserted = record.done
        try:
            async for event in self.retrieval.upsert_stream(record.subject, batches[first:]):
                if isinstance(event, BatchWritten):
                    index = first + event.sequence
                    error = await self._retry(record.subject, batches[index]) if event.error else ""
                    upserted += 0 if error else len(batches[index])
                    await ctx.progress(done=upserted, resume=index + 1, failed_batch=bool(error),
                                       error=f"batch {index}: {error}" if error else None)
        except MeshClientError as err:
            await ctx.progress(error=f"{err.code.name}: {err.message}")
        return {"upserted": upserted, "batches": len(batches), "failed_batches": record.failed_batches}

    async def _retry(self, collection: str, batch: list[Document], attempts: int = 4) -> str:
        """Write a batch the stream refused on its own; returns the final error, or "" once written.

        A retryable refusal (a reindex swapping, the embedding service restarting) is retried with
        backoff; a permanent one comes back with its named fields.
        """
        delay = 0.25
        for attempt in range(attempts):
            try:
                await self.retrieval.upsert(collection, batch, timeout_s=60)
                return ""
            except MeshClientError as err:
                if not err.retryable or attempt == attempts - 1:
                    return f"{err.code.name}: {err.message}"
            await asyncio.sleep(delay)
            delay *= 2
        return "not written"

    async def _reindex(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any] | None:
        """Rebuild and swap (a resumed reindex starts over: the old collection keeps serving until the swap)."""
        try:
            async for event in self.retrieval.reindex(record.subject):
                if isinstance(event, ReindexProgress):
                    await ctx.progress(done=event.done, total=event.total)
                else:
                    return {"previous_collection": event.previous_collection, "collection": event.collection,
                            "documents": event.documents, "embedding_revision": event.embedding_revision}
        except MeshClientError as err:
            await ctx.progress(error=f"{err.code.name}: {err.message}")
        return None
