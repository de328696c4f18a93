"""gRPC servicer: proto -> :class:`Retriever` -> proto."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator

import grpc
from google.protobuf import struct_pb2
from mesh.retrieval.v1 import retrieval_pb2 as pb

from services.bootstrap.errors import FailedPrecondition, InvalidInput, MeshError, Violation
from services.retrieval import convert
from services.retrieval.gate import DEFAULT_MARGIN, Gate, GateQuery
from services.retrieval.query import Document
from services.retrieval.retriever import Retriever


class RetrievalServicer:
    """Implements mesh.retrieval.v1.RetrievalService over a :class:`Retriever` (a reader's refuses writes)."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def _writer(self) -> None:
        """Refuse a write on a reader: writes coordinate in the one writer's process."""
        if self.retriever.reader:
            raise FailedPrecondition("this retrieval instance is a reader (--role reader): create, write, delete, "
                                     "reindex and roll back through the writer (the gateway's "
                                     "--retrieval-writer-target)")

    async def CreateCollection(self, request, context):  # noqa: N802
        """Create a catalog."""
        self._writer()
        meta, count = await self.retriever.admin.create(request.name, convert.fields_from_proto(request.fields))
        return pb.CreateCollectionResponse(collection=convert.collection_info(meta, count))

    async def GetCollection(self, request, context):  # noqa: N802
        """Describe a catalog."""
        meta, count = await self.retriever.admin.describe(request.name)
        return pb.GetCollectionResponse(collection=convert.collection_info(meta, count))

    async def ListCollections(self, request, context):  # noqa: N802
        """Every catalog."""
        rows = await self.retriever.admin.list_catalogs()
        return pb.ListCollectionsResponse(collections=[convert.collection_info(m, n) for m, n in rows])

    async def DeleteCollection(self, request, context):  # noqa: N802
        """Remove a catalog and its data."""
        self._writer()
        collection, documents = await self.retriever.admin.delete_catalog(request.name)
        return pb.DeleteCollectionResponse(collection=collection, documents=documents)

    async def UpsertDocuments(self, request, context):  # noqa: N802
        """Write one batch (within the caller's deadline)."""
        self._writer()
        out = await self.retriever.documents.upsert(request.collection, _documents(request.documents),
                                          context.time_remaining())
        return pb.UpsertDocumentsResponse(upserted=out.upserted, embed_ns=out.embed_ns, tokenize_ns=out.tokenize_ns,
                                          write_ns=out.write_ns)

    async def UpsertDocumentsStream(self, requests, context) -> AsyncIterator[pb.UpsertDocumentsStreamResponse]:  # noqa: N802
        """Write batches in order; a rejected batch is reported and the stream goes on."""
        self._writer()
        start = time.perf_counter()
        batches = failed = total = 0
        async for req in requests:
            seq = batches
            batches += 1
            try:
                out = await self.retriever.documents.upsert(req.collection, _documents(req.documents))
            except MeshError as err:
                failed += 1
                yield pb.UpsertDocumentsStreamResponse(progress=pb.UpsertProgress(
                    sequence=seq, error=f"{type(err).__name__}: {err.message}", total_upserted=total))
                continue
            total += out.upserted
            yield pb.UpsertDocumentsStreamResponse(progress=pb.UpsertProgress(
                sequence=seq, total_upserted=total, response=pb.UpsertDocumentsResponse(
                    upserted=out.upserted, embed_ns=out.embed_ns, tokenize_ns=out.tokenize_ns, write_ns=out.write_ns)))
        yield pb.UpsertDocumentsStreamResponse(summary=pb.UpsertSummary(
            batches=batches, failed_batches=failed, upserted=total,
            total_ns=int((time.perf_counter() - start) * 1e9)))

    async def DeleteDocuments(self, request, context):  # noqa: N802
        """Remove documents."""
        self._writer()
        n = await self.retriever.documents.delete(request.collection, list(request.ids))
        return pb.DeleteDocumentsResponse(requested=n)

    async def Search(self, request, context: grpc.aio.ServicerContext):  # noqa: N802
        """Search."""
        _check_ranges(request.filter)
        q, fusion, rrf_k, weight = convert.search_from_proto(request)
        q = self.retriever.searches.with_defaults(q, fusion, rrf_k, weight)
        out = await self.retriever.searches.search(request.collection, q, context.time_remaining())
        return pb.SearchResponse(
            hits=[convert.hit_to_proto(h) for h in out.hits], mode=convert.NAME_TO_MODE[out.mode],
            degraded=out.degraded, fusion=convert.NAME_TO_FUSION.get(out.fusion or "", 0),
            fusion_reason=out.fusion_reason,
            timings=pb.SearchTimings(embed_ns=out.embed_ns, tokenize_ns=out.tokenize_ns, search_ns=out.search_ns,
                                     total_ns=out.total_ns))

    async def Reindex(self, request, context) -> AsyncIterator[pb.ReindexResponse]:  # noqa: N802
        """Rebuild and swap (an upgrade when another embedding revision is named), streaming progress."""
        self._writer()
        gate = _gate(request) if request.HasField("gate") else None
        args = (request.collection, request.batch_size or 64, request.embedding_revision, gate, request.grace_s)
        if request.validate_only:
            await self.retriever.reindexer.plan(*args)
            return
        async for event in self.retriever.reindexer.reindex(*args):
            if event.get("summary"):
                summary = pb.ReindexSummary(
                    previous_collection=event["previous_collection"], collection=event["collection"],
                    documents=event["documents"], embedding_revision=event["embedding_revision"],
                    total_ns=event["total_ns"], layout=event["layout"], kept_collection=event["kept_collection"],
                    rollback_until=event["rollback_until"])
                if event["gate"] is not None:
                    summary.gate.CopyFrom(pb.GateResult(**event["gate"].as_dict()))
                yield pb.ReindexResponse(summary=summary)
            elif "gate" in event:
                yield pb.ReindexResponse(gate=pb.GateResult(**event["gate"].as_dict()))
            else:
                yield pb.ReindexResponse(progress=pb.ReindexProgress(done=event["done"], total=event["total"]))
            await asyncio.sleep(0)

    async def Rollback(self, request, context):  # noqa: N802
        """Point the alias back at the version the last upgrade replaced."""
        self._writer()
        meta, count, removed = await self.retriever.reindexer.rollback(request.name)
        return pb.RollbackResponse(collection=convert.collection_info(meta, count), removed_collection=removed)

    async def ListRevisions(self, request, context):  # noqa: N802
        """The embedding revisions this service can embed with."""
        served = await self.retriever.state.embedders.served(self.retriever.state.embed_timeout_s)
        return pb.ListRevisionsResponse(revisions=[pb.EmbeddingRevision(revision=r.revision, dim=r.dim,
                                                                         target=r.target) for r in served])


def _gate(request: pb.ReindexRequest) -> Gate:
    g = request.gate
    mode = convert.MODE_TO_NAME.get(g.mode) if g.mode else "dense"
    return Gate(tuple(GateQuery(q.query, tuple(q.relevant_ids)) for q in g.queries),
                g.margin if g.HasField("margin") else DEFAULT_MARGIN, mode or "?")


def _check_ranges(flt: pb.Filter) -> None:
    """Range bounds must be finite: Qdrant ignores a NaN bound, so ``gte: NaN`` used to match everything."""
    bad = [Violation(f"filter.{where}[{i}].range.{bound}", "must be a finite number (no NaN or infinity)")
           for where, conds in (("must", flt.must), ("must_not", flt.must_not)) for i, c in enumerate(conds)
           if c.WhichOneof("test") == "range" for bound in ("gte", "gt", "lte", "lt")
           if c.range.HasField(bound) and not math.isfinite(getattr(c.range, bound))]
    if bad:
        raise InvalidInput(f"invalid search: {bad[0].field}: {bad[0].description}", bad)


def _documents(docs) -> list[Document]:
    """Documents of a request; a payload number JSON cannot hold (NaN, infinity) is a named violation.

    Converting such a payload used to raise deep in protobuf's JSON printer: INTERNAL, and in a
    stream the end of the whole stream instead of one rejected batch.
    """
    bad: list[Violation] = []

    def walk(value: struct_pb2.Value, path: str) -> None:
        kind = value.WhichOneof("kind")
        if kind == "number_value" and not math.isfinite(value.number_value):
            bad.append(Violation(path, "must be a finite number (no NaN or infinity)"))
        elif kind == "struct_value":
            for key, item in value.struct_value.fields.items():
                walk(item, f"{path}.{key}")
        elif kind == "list_value":
            for i, item in enumerate(value.list_value.values):
                walk(item, f"{path}[{i}]")

    for i, d in enumerate(docs):
        for key, item in d.payload.fields.items():
            walk(item, f"documents[{i}].payload.{key}")
    if bad:
        raise InvalidInput(f"{bad[0].field}: {bad[0].description} ({len(bad)} problem(s) in the batch); "
                           "nothing was written", bad)
    return convert.documents_from_proto(docs)
