"""gRPC servicer: proto -> :class:`Embedder` -> proto. No logic lives here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
from mesh.embedding.v1 import embedding_pb2 as pb

from services.bootstrap.errors import FailedPrecondition, InvalidInput, MeshError, grpc_code_for
from services.embedding.embedder import Embedder, EmbedResult

_KIND = {pb.EMBED_KIND_QUERY: "query", pb.EMBED_KIND_PASSAGE: "passage"}
STREAM_WINDOW = 4  # batches of one stream in flight at once


def _deadline(context: grpc.aio.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.perf_counter() + remaining


def _response(result: EmbedResult, revision: str) -> pb.EmbedResponse:
    resp = pb.EmbedResponse(model_revision=revision, timings=pb.EmbedTimings(
        tokenize_ns=result.tokenize_ns, queue_ns=result.queue_ns, inference_ns=result.inference_ns,
        total_ns=result.total_ns, batch_size=result.batch_size))
    for vec, count, cut in zip(result.vectors.tolist(), result.token_counts, result.truncated, strict=True):
        resp.embeddings.add(values=vec, token_count=count, truncated=cut)
    return resp


def _batch_error(err: MeshError) -> pb.BatchError:
    out = pb.BatchError(code=grpc_code_for(err).value[0], message=err.message)
    if isinstance(err, InvalidInput):
        for v in err.violations:
            out.field_violations.add(field=v.field, description=v.description)
    return out


def check_revision(wanted: str, served: str) -> None:
    """Refuse a request that names another model revision than the one served (never another model's vectors)."""
    if wanted and wanted != served:
        raise FailedPrecondition(f"this embedding instance serves revision {served}, not {wanted}: send the request "
                                 "to the instance serving that revision")


class EmbeddingServicer:
    """Implements mesh.embedding.v1.EmbeddingService over an :class:`Embedder`."""

    def __init__(self, embedder: Embedder, info: pb.InfoResponse) -> None:
        self.embedder = embedder
        self.info = info

    async def Embed(self, request: pb.EmbedRequest, context: grpc.aio.ServicerContext) -> pb.EmbedResponse:  # noqa: N802
        """Embed one batch of texts."""
        check_revision(request.revision, self.embedder.revision)
        result = await self.embedder.embed(list(request.texts), _KIND.get(request.kind),
                                           strict=request.options.strict_length, deadline=_deadline(context))
        return _response(result, self.embedder.revision)

    async def EmbedStream(self, requests: AsyncIterator[pb.EmbedStreamRequest],  # noqa: N802
                          context: grpc.aio.ServicerContext) -> AsyncIterator[pb.EmbedStreamResponse]:
        """Answer each streamed batch in order; a bad batch gets an error entry, then a summary."""
        start = time.perf_counter()
        failed = texts = 0
        deadline = _deadline(context)
        # Up to STREAM_WINDOW batches are in flight at once, so reading and tokenising the next
        # batch overlaps with inference of the current one; answers still go out in order.
        inflight: asyncio.Queue[tuple[pb.EmbedStreamRequest, asyncio.Task[EmbedResult]] | None] = \
            asyncio.Queue(maxsize=STREAM_WINDOW)
        count = 0

        async def read() -> None:
            nonlocal count
            try:
                async for req in requests:
                    task = asyncio.ensure_future(self._embed_batch(req, deadline))
                    await inflight.put((req, task))
                    count += 1
            finally:
                await inflight.put(None)

        reader = asyncio.ensure_future(read())
        try:
            seq = 0
            while (item := await inflight.get()) is not None:
                req, task = item
                try:
                    result = await task
                except (InvalidInput, FailedPrecondition) as err:
                    failed += 1
                    yield pb.EmbedStreamResponse(result=pb.EmbedBatchResult(
                        batch_id=req.batch_id, sequence=seq, error=_batch_error(err)))
                else:
                    texts += len(req.texts)
                    yield pb.EmbedStreamResponse(result=pb.EmbedBatchResult(
                        batch_id=req.batch_id, sequence=seq, response=_response(result, self.embedder.revision)))
                seq += 1
            await reader  # re-raises a malformed request read from the stream
        finally:
            reader.cancel()
            while not inflight.empty():
                item = inflight.get_nowait()
                if item is not None:
                    item[1].cancel()
        yield pb.EmbedStreamResponse(summary=pb.EmbedStreamSummary(
            batches=count, failed_batches=failed, texts=texts,
            total_ns=int((time.perf_counter() - start) * 1e9)))

    async def _embed_batch(self, req: pb.EmbedStreamRequest, deadline: float | None) -> EmbedResult:
        check_revision(req.revision, self.embedder.revision)
        return await self.embedder.embed(list(req.texts), _KIND.get(req.kind), strict=req.options.strict_length,
                                         deadline=deadline)

    async def Info(self, request: pb.InfoRequest, context: grpc.aio.ServicerContext) -> pb.InfoResponse:  # noqa: N802
        """Describe the served model."""
        return self.info
