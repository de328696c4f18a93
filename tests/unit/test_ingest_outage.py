"""An ingest job outlives a retrieval restart: its stream reopened from the first batch not acknowledged."""

from __future__ import annotations

import asyncio
import json

import grpc

from clients.errors import Unavailable
from clients.retrieval import BatchWritten
from gateway.catalog.jobs import CatalogJobs
from services.runtime.jobs.records import JobRecord


class FlakyRetrieval:
    """A stand-in retrieval client (the real one's ``upsert_stream``): the first stream breaks after two batches."""

    def __init__(self, breaks: int) -> None:
        self.breaks = breaks
        self.streams: list[list[str]] = []  # the first document id of each batch, per stream

    async def upsert_stream(self, collection, batches):
        self.streams.append([b[0].id for b in batches])
        for i, _ in enumerate(batches):
            if self.breaks and i == 2:
                self.breaks -= 1
                raise Unavailable(grpc.StatusCode.UNAVAILABLE, "retrieval restarting")
            yield BatchWritten(sequence=i, error="", total_upserted=0)


class Progress:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def progress(self, **kw) -> None:
        self.calls.append(kw)


def _run(retrieval, outage_s: float) -> tuple[dict, Progress]:
    docs = [{"id": f"d{i}", "text": "문서"} for i in range(10)]
    payload = json.dumps({"documents": docs, "batch_size": 2}).encode()
    ctx = Progress()
    handler = CatalogJobs(retrieval, outage_s=outage_s).handlers()["ingest"]
    return asyncio.run(handler(JobRecord("j", "ingest", "c"), payload, ctx)), ctx


def test_a_broken_stream_is_reopened_from_the_first_batch_not_acknowledged():
    retrieval = FlakyRetrieval(breaks=1)
    result, ctx = _run(retrieval, outage_s=30)
    assert retrieval.streams == [["d0", "d2", "d4", "d6", "d8"], ["d4", "d6", "d8"]]
    assert result["upserted"] == 10 and [c["resume"] for c in ctx.calls] == [1, 2, 3, 4, 5]
    assert not any(c.get("error") for c in ctx.calls)


def test_past_the_outage_budget_the_job_ends_with_the_error():
    result, ctx = _run(FlakyRetrieval(breaks=99), outage_s=0)
    assert result["upserted"] == 4 and "UNAVAILABLE" in ctx.calls[-1]["error"]
