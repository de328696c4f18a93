"""The work of ingest and reindex jobs, run on whichever gateway instance took the job.

Ingest and reindex jobs belong to the gateway, not to retrieval: a job is the REST contract's
orchestration (batches, retries with backoff, a resume point, progress and cancel) over retrieval's
idempotent streaming writes, so retrieval keeps no queue and can restart at any moment, and the
gateway's shared Redis store already holds the jobs of every instance. OCR's jobs live in the OCR
service because their work (reading pages) is that service's own.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from clients.errors import MeshClientError
from clients.retrieval import AsyncRetrievalClient, BatchWritten, Document, GateQuery, GateResult, ReindexProgress
from gateway.catalog import protocol as api
from services.runtime.jobs import Handler, JobContext, JobRecord


def gate_args(gate: api.QualityGateIn | dict[str, Any] | None) -> dict[str, Any]:
    """The retrieval client's gate arguments of a REST (or stored job) gate."""
    if gate is None:
        return {}
    g = api.QualityGateIn.model_validate(gate) if isinstance(gate, dict) else gate
    return {"gate": [GateQuery(q.query, q.relevant_ids) for q in g.queries], "margin": g.margin, "gate_mode": g.mode}


class CatalogJobs:
    """The ingest and reindex handlers over the retrieval client."""

    def __init__(self, retrieval: AsyncRetrievalClient, outage_s: float = 60.0) -> None:
        self.retrieval = retrieval
        self.outage_s = outage_s  # how long an ingest waits for retrieval to come back before it fails

    def handlers(self) -> dict[str, Handler]:
        """The job kinds this feature runs."""
        return {"ingest": self._ingest, "reindex": self._reindex}

    async def _ingest(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any]:
        """Send the batches not yet acknowledged (a resumed job continues where it stopped).

        A stream broken by a retryable error (retrieval restarting) is opened again from the first batch not
        acknowledged, with backoff, for up to ``outage_s``; writes are idempotent, so a batch written but not
        acknowledged before the break is only written again.
        """
        work = json.loads(payload)
        docs = [Document(d["id"], d["text"], d.get("payload") or {}) for d in work["documents"]]
        size = work["batch_size"]
        batches = [docs[i:i + size] for i in range(0, len(docs), size)]
        resume = record.resume  # batches before this one were acknowledged by an earlier attempt
        upserted = record.done
        loop = asyncio.get_running_loop()
        give_up, delay = loop.time() + self.outage_s, 0.5
        while resume < len(batches):
            first = resume
            try:
                async for event in self.retrieval.upsert_stream(record.subject, batches[first:]):
                    if isinstance(event, BatchWritten):
                        index = first + event.sequence
                        error = await self._retry(record.subject, batches[index]) if event.error else ""
                        upserted += 0 if error else len(batches[index])
                        resume = index + 1
                        await ctx.progress(done=upserted, resume=resume, failed_batch=bool(error),
                                           error=f"batch {index}: {error}" if error else None)
                break
            except MeshClientError as err:
                if not err.retryable or loop.time() >= give_up:
                    await ctx.progress(error=f"{err.code.name}: {err.message}")
                    break
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
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
        """Rebuild and swap (a resumed reindex starts over: the old collection keeps serving until the swap).

        An upgrade (``embedding_revision`` in the payload) carries the quality gate; its figures are in the
        result whether the gate let the swap happen or not.
        """
        work = json.loads(payload or b"{}") or {}
        verdict: GateResult | None = None
        try:
            async for event in self.retrieval.reindex(
                    record.subject, work.get("batch_size", 64), embedding_revision=work.get("embedding_revision", ""),
                    grace_s=work.get("grace_s", 0.0), **gate_args(work.get("gate"))):
                if isinstance(event, ReindexProgress):
                    await ctx.progress(done=event.done, total=event.total)
                elif isinstance(event, GateResult):
                    verdict = event
                else:
                    out: dict[str, Any] = {
                        "previous_collection": event.previous_collection, "collection": event.collection,
                        "documents": event.documents, "embedding_revision": event.embedding_revision,
                        "layout": event.layout}
                    if event.gate is not None:
                        out["gate"] = event.gate.as_dict()
                    if event.kept_collection:
                        out.update(kept_collection=event.kept_collection, rollback_until=event.rollback_until)
                    return out
        except MeshClientError as err:
            await ctx.progress(error=f"{err.code.name}: {err.message}")
        return {"gate": verdict.as_dict()} if verdict is not None else None
