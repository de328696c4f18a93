"""gRPC servicer: proto -> :class:`Retriever` -> proto."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
from mesh.retrieval.v1 import retrieval_pb2 as pb

from services.bootstrap.errors import MeshError
from services.retrieval import convert
from services.retrieval.retriever import Retriever


class RetrievalServicer:
    """Implements mesh.retrieval.v1.RetrievalService over a :class:`Retriever`."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    async def CreateCollection(self, request, context):  # noqa: N802
        """Create a catalog."""
        meta, count = await self.retriever.create(request.name, convert.fields_from_proto(request.fields))
        return pb.CreateCollectionResponse(collection=convert.collection_info(meta, count))

    async def GetCollection(self, request, context):  # noqa: N802
        """Describe a catalog."""
        meta, count = await self.retriever.describe(request.name)
        return pb.GetCollectionResponse(collection=convert.collection_info(meta, count))

    async def UpsertDocuments(self, request, context):  # noqa: N802
        """Write one batch."""
        out = await self.retriever.upsert(request.collection, convert.documents_from_proto(request.documents))
        return pb.UpsertDocumentsResponse(upserted=out.upserted, embed_ns=out.embed_ns, tokenize_ns=out.tokenize_ns,
                                          write_ns=out.write_ns)

    async def UpsertDocumentsStream(self, requests, context) -> AsyncIterator[pb.UpsertDocumentsStreamResponse]:  # noqa: N802
        """Write batches in order; a rejected batch is reported and the stream goes on."""
        start = time.perf_counter()
        batches = failed = total = 0
        async for req in requests:
            seq = batches
            batches += 1
            try:
                out = await self.retriever.upsert(req.collection, convert.documents_from_proto(req.documents))
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
        n = await self.retriever.delete(request.collection, list(request.ids))
        return pb.DeleteDocumentsResponse(requested=n)

    async def Search(self, request, context: grpc.aio.ServicerContext):  # noqa: N802
        """Search."""
        q, fusion, rrf_k, weight = convert.search_from_proto(request)
        q = self.retriever.with_defaults(q, fusion, rrf_k, weight)
        out = await self.retriever.search(request.collection, q, context.time_remaining())
        return pb.SearchResponse(
            hits=[convert.hit_to_proto(h) for h in out.hits], mode=convert.NAME_TO_MODE[out.mode],
            degraded=out.degraded, fusion=convert.NAME_TO_FUSION.get(out.fusion or "", 0),
            timings=pb.SearchTimings(embed_ns=out.embed_ns, tokenize_ns=out.tokenize_ns, search_ns=out.search_ns,
                                     total_ns=out.total_ns))

    async def Reindex(self, request, context) -> AsyncIterator[pb.ReindexResponse]:  # noqa: N802
        """Rebuild and swap, streaming progress."""
        async for event in self.retriever.reindex(request.collection, request.batch_size or 64):
            if event.get("summary"):
                yield pb.ReindexResponse(summary=pb.ReindexSummary(
                    previous_collection=event["previous_collection"], collection=event["collection"],
                    documents=event["documents"], embedding_revision=event["embedding_revision"],
                    total_ns=event["total_ns"]))
            else:
                yield pb.ReindexResponse(progress=pb.ReindexProgress(done=event["done"], total=event["total"]))
            await asyncio.sleep(0)
