"""Several retrieval replicas over one store: a writer and two readers, writes sent round-robin to all three.

Retrieval has one writer (services/retrieval/writes.py: the write gate and the record of writes made
during a reindex live in its process); readers refuse writes and follow the writer's swaps through the
store's metadata (re-read after --meta-ttl-s, and at once when the version they searched was dropped).
The embedded engine's folder cannot be opened by two processes, so the three replicas run in this
process over one open store, each with its own state (threads, metadata, gates), on ports of their own.

Before (issue 59): every replica took writes with per-process coordination, so a write landing on
another replica during a reindex was missing from the new version, and a replica kept searching and
writing the version another had dropped.
"""

from __future__ import annotations

import asyncio
import itertools

import grpc
import pytest
import pytest_asyncio
from mesh.retrieval.v1 import retrieval_pb2 as pb

from support.servers import retrieval_stub, running_embedding

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = [(f"b{i}", t) for i, t in enumerate([
    "비 오는 날 읽기 좋은 장편소설", "백엔드 개발자 기술 면접 질문 모음", "제주도 여행 가이드북과 맛집 지도",
    "아이와 함께 읽는 사계절 그림 동화책", "주식 투자 입문과 재무제표 읽는 법", "겨울 캠핑 장비 체크리스트"])]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def replicas(model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("replicas")
    async with running_embedding(model_dir) as first, running_embedding(model_dir, revision_label="next") as second:
        more = {"more_embedding_targets": f"127.0.0.1:{second.port}", "rollback_grace_s": 60, "meta_ttl_s": 0.3}
        async with retrieval_stub(folder, first.port, **more) as (writer, w_stub), \
                retrieval_stub(folder, first.port, store=writer.retriever.store, role="reader", **more) as (r1, s1), \
                retrieval_stub(folder, first.port, store=writer.retriever.store, role="reader", **more) as (r2, s2):
            await w_stub.CreateCollection(pb.CreateCollectionRequest(name="books"), timeout=30)
            await w_stub.UpsertDocuments(pb.UpsertDocumentsRequest(
                collection="books", documents=[pb.Document(id=i, text=t) for i, t in DOCS]), timeout=60)
            yield [writer, r1, r2], [w_stub, s1, s2], second.embedder.revision


async def churn(stubs, phase: str, done: asyncio.Event) -> dict:
    """Writes and searches round-robin over every replica until ``done``: what was acknowledged, refused, failed."""
    out = {"acked": [], "refused": 0, "retry": 0, "searches": 0, "search_failures": []}
    for i in itertools.count():
        if done.is_set():
            break
        stub = stubs[i % len(stubs)]
        doc = pb.Document(id=f"{phase}-{i}", text=f"{phase} 단계에 추가한 {i}번째 신간 도서 소개")
        try:
            await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="books", documents=[doc]), timeout=30)
            out["acked"].append(doc.id)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.FAILED_PRECONDITION and "reader" in err.details():
                out["refused"] += 1  # a reader: nothing acknowledged, the caller is told where writes go
            elif err.code() == grpc.StatusCode.UNAVAILABLE:
                out["retry"] += 1  # the writer during a swap: retryable, nothing acknowledged
            else:
                raise
        for s in stubs:
            try:
                await s.Search(pb.SearchRequest(collection="books", query="도서 소개", top_k=3), timeout=30)
                out["searches"] += 1
            except grpc.aio.AioRpcError as err:
                out["search_failures"].append(f"{err.code().name}: {err.details()}")
        await asyncio.sleep(0)
    return out


async def during(stubs, phase: str, operation) -> dict:
    done = asyncio.Event()
    task = asyncio.create_task(churn(stubs, phase, done))
    await asyncio.sleep(0.2)  # writes and searches under way before the operation starts
    try:
        await operation()
    finally:
        await asyncio.sleep(0.2)
        done.set()
    return await task


async def check_every_replica(services, stubs, acked: list[str]) -> None:
    """Every acknowledged write is in the live version, and every replica searches that version."""
    writer = services[0]
    live = await writer.retriever.state.meta("books", fresh=True)
    stored = {d.doc_id for page in writer.retriever.store.scroll_all(live.collection) for d in page}
    assert set(acked) <= stored, sorted(set(acked) - stored)[:10]
    await asyncio.sleep(0.35)  # past the readers' metadata TTL
    for svc, stub in zip(services, stubs, strict=True):
        found = await stub.Search(pb.SearchRequest(collection="books", query="도서 소개", top_k=3), timeout=30)
        assert found.hits
        assert (await svc.retriever.state.meta("books")).collection == live.collection


async def reindex(stub, **kw):
    return [e async for e in stub.Reindex(pb.ReindexRequest(collection="books", batch_size=4, **kw), timeout=120)]


async def test_a_reader_refuses_writes_and_the_writer_takes_them(replicas):
    _, stubs, _ = replicas
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stubs[1].UpsertDocuments(pb.UpsertDocumentsRequest(
            collection="books", documents=[pb.Document(id="x", text="읽기 전용")]), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "writer" in err.value.details()
    for call in (stubs[2].Rollback(pb.RollbackRequest(name="books"), timeout=10),
                 stubs[2].DeleteCollection(pb.DeleteCollectionRequest(name="books"), timeout=10)):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await reindex(stubs[1])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_writes_round_robin_through_a_reindex_an_upgrade_with_rollback_and_a_reindex_lose_nothing(replicas):
    services, stubs, nxt = replicas
    acked: list[str] = []
    for phase, operation in [
        ("reindex", lambda: reindex(stubs[0])),
        ("upgrade", lambda: reindex(stubs[0], embedding_revision=nxt)),
        ("rollback", lambda: stubs[0].Rollback(pb.RollbackRequest(name="books"), timeout=60)),
        ("again", lambda: reindex(stubs[0])),
    ]:
        before = (await services[0].retriever.state.meta("books", fresh=True)).collection
        seen = await during(stubs, phase, operation)
        after = (await services[0].retriever.state.meta("books", fresh=True)).collection
        assert after != before, phase  # the live version changed under the readers
        assert seen["acked"] and seen["refused"], (phase, seen)
        assert not seen["search_failures"], (phase, seen["search_failures"][:3])
        acked += seen["acked"]
        await check_every_replica(services, stubs, acked)
