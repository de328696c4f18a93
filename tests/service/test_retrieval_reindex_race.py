"""Writes racing a reindex (issue 17 defect 1), interleaved deterministically with gates, not sleeps.

The real retrieval server (Qdrant Edge on disk) and the real embedding server, both on port 0. The
embedder retrieval uses is the real gRPC one wrapped with gates: a call whose texts match a gate
stops before embedding until the test opens it, which is how each interleaving is forced. Every
write acknowledged during a reindex must be in the catalog after the swap (or, for a delete, stay
gone); a write that cannot be kept is refused with UNAVAILABLE and a message saying to retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import pytest
import pytest_asyncio
from google.protobuf import struct_pb2
from mesh.retrieval.v1 import retrieval_pb2 as pb

from clients.errors import from_rpc_error
from services.retrieval.embedding_client import GrpcEmbedder
from support.servers import retrieval_stub

pytestmark = pytest.mark.asyncio(loop_scope="session")

FIELDS = [pb.PayloadField(name="category", type=pb.FIELD_TYPE_KEYWORD)]
CATALOG = [(f"c{i}", text, cat) for i, (text, cat) in enumerate([
    ("비 오는 날 읽기 좋은 장편소설", "소설"), ("파이썬 데이터 분석 입문서", "IT"),
    ("아이에게 읽어 주는 그림 동화책", "아동"), ("백엔드 개발자 기술 면접 질문", "IT"),
    ("제주도 여행 가이드북과 맛집 지도", "여행"), ("조선 시대 궁중 음식의 역사", "요리"),
])]
NEW_DOCS = [("n1", "겨울 캠핑 장비 체크리스트", "여행"), ("n2", "봄 소풍 도시락 요리책", "요리")]


class Gate:
    """One embed call held before it runs: ``reached`` when it arrives, it goes on when ``opened``."""

    def __init__(self, matches: Callable[[list[str]], bool]) -> None:
        self.matches = matches
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()


class GatedEmbedder(GrpcEmbedder):
    """The real gRPC embedder; calls matching a gate wait for the test (timing injection only).

    ``revision_override`` stands for the embedding service having switched models.
    """

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.gates: list[Gate] = []
        self.revision_override: str | None = None

    def gate(self, matches: Callable[[list[str]], bool]) -> Gate:
        """Hold the next call whose texts satisfy ``matches``."""
        g = Gate(matches)
        self.gates.append(g)
        return g

    async def embed(self, texts, kind, timeout_s):  # noqa: D102
        for g in list(self.gates):
            if g.matches(texts):
                self.gates.remove(g)
                g.reached.set()
                await g.opened.wait()
        vectors, revision = await super().embed(texts, kind, timeout_s)
        return vectors, self.revision_override or revision


def docs(rows) -> list[pb.Document]:
    out = []
    for doc_id, text, category in rows:
        payload = struct_pb2.Struct()
        payload.update({"category": category})
        out.append(pb.Document(id=doc_id, text=text, payload=payload))
    return out


def has(doc_id: str) -> Callable[[list[str]], bool]:
    """Matches the embed call of a batch holding document ``doc_id`` (by its text)."""
    text = next(t for i, t, _ in [*CATALOG, *NEW_DOCS] if i == doc_id)
    return lambda texts: text in texts


def reindex_chunk(texts: list[str]) -> bool:
    """The reindex's first re-embedding call (it holds catalog documents)."""
    return CATALOG[0][1] in texts


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mesh(embedding_service, tmp_path_factory):
    embedder = GatedEmbedder(f"127.0.0.1:{embedding_service.port}")
    async with retrieval_stub(tmp_path_factory.mktemp("race"), embedding_service.port, embedder=embedder) as (
            svc, stub):
        yield svc, stub, embedder


async def new_catalog(stub, name: str) -> pb.CollectionInfo:
    await stub.CreateCollection(pb.CreateCollectionRequest(name=name, fields=FIELDS), timeout=30)
    await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection=name, documents=docs(CATALOG)), timeout=30)
    return (await stub.GetCollection(pb.GetCollectionRequest(name=name), timeout=10)).collection


async def stored_ids(svc, name: str) -> set[str]:
    """Every document id the catalog's current collection holds (read from the store itself)."""
    meta = await svc.retriever.state.meta(name)
    return {d.doc_id for page in svc.retriever.store.scroll_all(meta.collection) for d in page}


async def reindex(stub, name: str, batch_size: int = 64) -> list[pb.ReindexResponse]:
    return [e async for e in stub.Reindex(pb.ReindexRequest(collection=name, batch_size=batch_size), timeout=120)]


async def test_write_acknowledged_while_the_reindex_copies_is_in_the_new_collection(mesh):
    """The issue's repro: a write lands in the old collection after the reindex read it."""
    svc, stub, embedder = mesh
    before = await new_catalog(stub, "race-copy")
    copying = embedder.gate(reindex_chunk)
    job = asyncio.ensure_future(reindex(stub, "race-copy"))
    await copying.reached.wait()  # the reindex has read the old collection and is re-embedding it
    ack = await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="race-copy", documents=docs(NEW_DOCS)),
                                     timeout=30)
    assert ack.upserted == 2
    copying.opened.set()
    summary = (await job)[-1].summary
    assert summary.previous_collection == before.collection and summary.collection != before.collection
    assert await stored_ids(svc, "race-copy") == {d[0] for d in [*CATALOG, *NEW_DOCS]}
    hits = await stub.Search(pb.SearchRequest(collection="race-copy", query="캠핑 장비", mode=pb.SEARCH_MODE_KEYWORD),
                             timeout=10)
    assert hits.hits[0].id == "n1"


async def test_write_begun_before_the_reindex_and_stored_after_its_snapshot_is_kept(mesh):
    """The issue's exact sequence: the write passed the "no reindex running" check, then stored into
    the old collection after the reindex had read it; the swap used to drop it (acknowledged, lost)."""
    svc, stub, embedder = mesh
    await new_catalog(stub, "race-begun")
    writing = embedder.gate(has("n1"))
    write = asyncio.ensure_future(stub.UpsertDocuments(
        pb.UpsertDocumentsRequest(collection="race-begun", documents=docs(NEW_DOCS)), timeout=60))
    await writing.reached.wait()
    copying = embedder.gate(reindex_chunk)
    job = asyncio.ensure_future(reindex(stub, "race-begun"))
    await copying.reached.wait()  # snapshot read; the new collection is being filled
    writing.opened.set()
    assert (await write).upserted == 2
    copying.opened.set()
    await job
    assert await stored_ids(svc, "race-begun") == {d[0] for d in [*CATALOG, *NEW_DOCS]}


async def test_write_embedded_before_the_swap_and_stored_after_it_lands_in_the_new_collection(mesh):
    svc, stub, embedder = mesh
    await new_catalog(stub, "race-swap")
    writing = embedder.gate(has("n1"))
    write = asyncio.ensure_future(stub.UpsertDocuments(
        pb.UpsertDocumentsRequest(collection="race-swap", documents=docs(NEW_DOCS)), timeout=60))
    await writing.reached.wait()  # the write has passed its checks and is embedding
    summary = (await reindex(stub, "race-swap"))[-1].summary  # the whole reindex, swap and drop included
    writing.opened.set()
    assert (await write).upserted == 2
    assert (await svc.retriever.state.meta("race-swap")).collection == summary.collection
    assert await stored_ids(svc, "race-swap") == {d[0] for d in [*CATALOG, *NEW_DOCS]}


async def test_stream_batches_during_a_reindex_are_all_kept(mesh):
    """The gateway's ingest path: one stream, batches before, during and after the copy."""
    svc, stub, embedder = mesh
    await new_catalog(stub, "race-stream")
    copying = embedder.gate(reindex_chunk)
    job = asyncio.ensure_future(reindex(stub, "race-stream", batch_size=2))
    await copying.reached.wait()
    batches = [pb.UpsertDocumentsStreamRequest(collection="race-stream", documents=docs([d])) for d in NEW_DOCS]
    events = [e async for e in stub.UpsertDocumentsStream(iter(batches), timeout=60)]
    copying.opened.set()
    await job
    assert events[-1].summary.upserted == 2 and events[-1].summary.failed_batches == 0
    assert await stored_ids(svc, "race-stream") == {d[0] for d in [*CATALOG, *NEW_DOCS]}


async def test_delete_during_a_reindex_is_not_undone_by_the_copy(mesh):
    svc, stub, embedder = mesh
    await new_catalog(stub, "race-delete")
    copying = embedder.gate(reindex_chunk)
    job = asyncio.ensure_future(reindex(stub, "race-delete"))
    await copying.reached.wait()  # c1 is in the snapshot being copied
    await stub.DeleteDocuments(pb.DeleteDocumentsRequest(collection="race-delete", ids=["c1"]), timeout=10)
    copying.opened.set()
    await job
    assert await stored_ids(svc, "race-delete") == {d[0] for d in CATALOG} - {"c1"}


async def test_write_that_cannot_be_kept_is_refused_as_retryable_then_succeeds_after(mesh):
    """A model change: a write embedded by the new model cannot go into the old collection."""
    svc, stub, embedder = mesh
    await new_catalog(stub, "race-model")
    copying = embedder.gate(reindex_chunk)
    embedder.revision_override = "me5s-the-next-model"
    try:
        job = asyncio.ensure_future(reindex(stub, "race-model"))
        await copying.reached.wait()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="race-model", documents=docs(NEW_DOCS)),
                                       timeout=30)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE and "retry" in (info.value.details() or "")
        copying.opened.set()
        assert (await job)[-1].summary.embedding_revision == "me5s-the-next-model"
        ack = await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="race-model",
                                                                   documents=docs(NEW_DOCS)), timeout=30)
        assert ack.upserted == 2
    finally:
        embedder.revision_override = None
    assert await stored_ids(svc, "race-model") == {d[0] for d in [*CATALOG, *NEW_DOCS]}


async def test_a_write_during_a_reindex_to_passages_is_cut_into_passages_when_replayed(mesh):
    """A catalog written before passages: a write made while the reindex moves it is kept in the new layout."""
    from services.retrieval.passages import DOCUMENT_LAYOUT, Layout

    svc, stub, embedder = mesh
    state = svc.retriever.state
    layout, state.layout = state.layout, Layout(DOCUMENT_LAYOUT, 0, 0)
    try:
        before = await new_catalog(stub, "race-layout")
    finally:
        state.layout = layout
    assert before.layout == "document"
    long_text = " ".join(f"{i}번째 문장은 겨울 캠핑 장비를 고르는 방법을 설명합니다." for i in range(120))
    copying = embedder.gate(reindex_chunk)
    job = asyncio.ensure_future(reindex(stub, "race-layout"))
    await copying.reached.wait()
    ack = await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="race-layout", documents=docs(
        [("long", long_text, "여행")])), timeout=60)
    assert ack.upserted == 1
    copying.opened.set()
    assert (await job)[-1].summary.layout == layout.label()
    meta = await state.meta("race-layout")
    assert meta.layout == layout.label()
    assert await stored_ids(svc, "race-layout") == {d[0] for d in CATALOG} | {"long"}
    counts = svc.retriever.store.passage_counts(meta.collection, ["long", "c0"])
    assert counts["long"] > 5 and counts["c0"] == 1, "replayed in the new layout, not copied as written"


async def test_numbers_the_store_cannot_keep_are_refused_naming_the_field(mesh):
    """1e300 or 2**63 in an integer field, NaN in a payload or a range bound: INVALID_ARGUMENT, nothing written."""
    _, stub, _ = mesh
    fields = [pb.PayloadField(name="price", type=pb.FIELD_TYPE_INTEGER),
              pb.PayloadField(name="score", type=pb.FIELD_TYPE_FLOAT)]
    await stub.CreateCollection(pb.CreateCollectionRequest(name="numbers", fields=fields), timeout=30)
    for payload, field in [({"price": 1e300}, "documents[0].payload.price"),
                           ({"price": 2.0**63}, "documents[0].payload.price"),
                           ({"score": float("nan")}, "documents[0].payload.score"),
                           ({"extra": {"x": float("inf")}}, "documents[0].payload.extra.x")]:
        doc = pb.Document(id="p1", text="가격이 이상한 상품")
        doc.payload.update(payload)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="numbers", documents=[doc]), timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
        assert [v.field for v in from_rpc_error(info.value).violations] == [field]

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Search(pb.SearchRequest(collection="numbers", query="상품", filter=pb.Filter(must=[
            pb.Condition(field="price", range=pb.Range(gte=float("nan")))])), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in from_rpc_error(info.value).violations] == ["filter.must[0].range.gte"]
    info_after = await stub.GetCollection(pb.GetCollectionRequest(name="numbers"), timeout=10)
    assert info_after.collection.documents == 0
    bad, good = pb.Document(id="p1", text="가격이 이상한 상품"), pb.Document(id="p2", text="멀쩡한 상품")
    bad.payload.update({"score": float("nan")})
    good.payload.update({"price": 1000, "score": 4.5})
    stream = [pb.UpsertDocumentsStreamRequest(collection="numbers", documents=[d]) for d in (bad, good)]
    events = [e async for e in stub.UpsertDocumentsStream(iter(stream), timeout=30)]  # one batch refused, not all
    assert "documents[0].payload.score" in events[0].progress.error
    assert (events[-1].summary.failed_batches, events[-1].summary.upserted) == (1, 1)


async def test_a_batch_past_its_deadline_stops_and_searches_keep_answering(mesh):
    """Long texts analysed in one go used to hold the analyser thread long after the caller gave up."""
    _, stub, _ = mesh
    await new_catalog(stub, "deadline")
    line = "비 오는 날 읽기 좋은 장편소설과 빗소리, 파이썬 데이터 분석 입문서와 제주도 여행 가이드북. "
    long_docs = [pb.Document(id=f"long{i}", text=(f"{i}번 " + line * 400)[:20000]) for i in range(16)]
    with pytest.raises(grpc.aio.AioRpcError) as info:  # analysing them takes seconds; the caller gives 2 s
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="deadline", documents=long_docs), timeout=2)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    resp = await stub.Search(pb.SearchRequest(collection="deadline", query="장편소설", mode=pb.SEARCH_MODE_KEYWORD),
                             timeout=1.5)
    assert resp.hits and resp.hits[0].id == "c0"
