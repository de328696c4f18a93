"""The real retrieval server (Qdrant local mode) with the real embedding server, both on port 0."""

import asyncio

import grpc
import pytest
import pytest_asyncio
from google.protobuf import struct_pb2
from mesh.retrieval.v1 import retrieval_pb2 as pb

from clients.errors import from_rpc_error
from clients.retrieval import AsyncRetrievalClient, BatchWritten, Document, QueryVector, ReindexSummary, WriteSummary
from services.bootstrap.errors import DependencyUnavailable
from services.retrieval.embedding_client import GrpcEmbedder
from support.servers import retrieval_stub
from support.waiting import eventually_async

pytestmark = pytest.mark.asyncio(loop_scope="session")

# A small catalog written for these tests: (id, text, category, price, available)
CATALOG = [
    ("b1", "비 오는 날 읽기 좋은 장편소설, 빗소리와 함께하는 위로의 이야기", "소설", 15000, True),
    ("b2", "파이썬으로 배우는 데이터 분석 입문서. 판다스와 넘파이 예제", "IT", 28000, True),
    ("b3", "아이에게 읽어 주는 그림 동화책 모음", "아동", 12000, True),
    ("b4", "백엔드 개발자를 위한 기술 면접 질문과 모범 답안", "IT", 22000, True),
    ("b5", "신입 개발자 면접 준비: 자료구조와 알고리즘 핵심 정리", "IT", 19000, False),
    ("b6", "제주도 여행 가이드북, 올레길과 맛집 지도", "여행", 17000, True),
    ("b7", "조선 시대 궁중 음식의 역사와 조리법", "요리", 25000, True),
    ("b8", "Galaxy 스마트폰 사진 잘 찍는 법 2024 개정판", "IT", 16000, True),
]
FIELDS = [pb.PayloadField(name="category", type=pb.FIELD_TYPE_KEYWORD),
          pb.PayloadField(name="price", type=pb.FIELD_TYPE_INTEGER),
          pb.PayloadField(name="available", type=pb.FIELD_TYPE_BOOL)]


def documents(rows=CATALOG):
    out = []
    for doc_id, text, category, price, available in rows:
        payload = struct_pb2.Struct()
        payload.update({"category": category, "price": price, "available": available})
        out.append(pb.Document(id=doc_id, text=text, payload=payload))
    return out


class SwitchableEmbedder(GrpcEmbedder):
    """The real gRPC embedder with an off switch (fault injection) and a revision override."""

    down = False
    revision_override: str | None = None

    async def embed(self, texts, kind, timeout_s):
        if self.down:
            raise DependencyUnavailable("embedding is down (injected)")
        vectors, revision = await super().embed(texts, kind, timeout_s)
        return vectors, self.revision_override or revision


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def retrieval(embedding_service, tmp_path_factory):
    embedder = SwitchableEmbedder(f"127.0.0.1:{embedding_service.port}")
    async with retrieval_stub(tmp_path_factory.mktemp("qdrant"), embedding_service.port, embedder=embedder) as (
            svc, stub):
        await stub.CreateCollection(pb.CreateCollectionRequest(name="books", fields=FIELDS), timeout=30)
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="books", documents=documents()), timeout=30)
        yield svc, stub, embedder


async def search(stub, query, **kw):
    return await stub.Search(pb.SearchRequest(collection="books", query=query, **kw), timeout=10)


async def expect_code(coro, code):
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await coro
    assert info.value.code() == code, info.value.details()
    return from_rpc_error(info.value)


async def test_hybrid_search_finds_the_right_book_and_explains_both_legs(retrieval):
    _, stub, _ = retrieval
    resp = await search(stub, "개발자 면접 준비", top_k=3)
    assert resp.mode == pb.SEARCH_MODE_HYBRID and not resp.degraded and resp.fusion == pb.FUSION_METHOD_AUTO
    assert resp.fusion_reason.startswith("auto: ")
    assert resp.hits[0].id in ("b4", "b5")
    top = resp.hits[0]
    assert top.dense.rank >= 1 and top.keyword.rank >= 1  # found by both legs
    assert resp.timings.embed_ns > 0 and resp.timings.search_ns > 0


async def test_keyword_and_dense_modes_and_query_vector(retrieval, embedding_service):
    _, stub, _ = retrieval
    kw = await search(stub, "제주도 맛집", mode=pb.SEARCH_MODE_KEYWORD)
    assert kw.mode == pb.SEARCH_MODE_KEYWORD and kw.hits[0].id == "b6" and kw.timings.embed_ns == 0
    assert all(h.dense.rank == 0 for h in kw.hits)
    dense = await search(stub, "섬으로 떠나는 휴가", mode=pb.SEARCH_MODE_DENSE, top_k=3)
    assert dense.mode == pb.SEARCH_MODE_DENSE and "b6" in [h.id for h in dense.hits]
    from clients import AsyncEmbeddingClient

    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        vec = (await client.embed(["섬으로 떠나는 휴가"], "query")).vectors[0]
    revision = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    given = await search(stub, "섬으로 떠나는 휴가", mode=pb.SEARCH_MODE_DENSE, top_k=3, query_vector=vec.tolist(),
                         query_vector_revision=revision.embedding_revision)
    assert [h.id for h in given.hits] == [h.id for h in dense.hits] and given.timings.embed_ns == 0


async def test_korean_particles_do_not_block_keyword_matches(retrieval):
    _, stub, _ = retrieval
    resp = await search(stub, "동화책을", mode=pb.SEARCH_MODE_KEYWORD)
    assert resp.hits and resp.hits[0].id == "b3"


async def test_filters_apply_inside_both_legs(retrieval):
    _, stub, _ = retrieval
    flt = pb.Filter(must=[pb.Condition(field="category", keyword="IT"),
                          pb.Condition(field="price", range=pb.Range(lte=23000))],
                    must_not=[pb.Condition(field="available", flag=False)])
    for mode in (pb.SEARCH_MODE_HYBRID, pb.SEARCH_MODE_DENSE, pb.SEARCH_MODE_KEYWORD):
        resp = await search(stub, "개발자 면접 스마트폰", filter=flt, mode=mode)
        ids = {h.id for h in resp.hits}
        assert ids and ids <= {"b4", "b8"}, (mode, ids)


@pytest.mark.parametrize("fusion", [pb.FUSION_METHOD_RRF, pb.FUSION_METHOD_DBSF, pb.FUSION_METHOD_WEIGHTED])
async def test_other_fusions(retrieval, fusion):
    _, stub, _ = retrieval
    resp = await search(stub, "데이터 분석 파이썬", fusion=pb.Fusion(method=fusion, dense_weight=0.4))
    assert resp.fusion == fusion and resp.hits[0].id == "b2"


async def test_mmr_and_score_threshold(retrieval):
    _, stub, _ = retrieval
    plain = await search(stub, "개발자 면접", top_k=3)
    diverse = await search(stub, "개발자 면접", top_k=3, mmr=pb.Mmr(diversity=0.9))
    assert len(diverse.hits) == 3 and diverse.hits[0].id == plain.hits[0].id
    floor = await search(stub, "개발자 면접", top_k=8, score_threshold=plain.hits[1].score)
    assert all(h.score >= plain.hits[1].score for h in floor.hits) and len(floor.hits) >= 2


async def test_embedding_down_means_keyword_only_and_says_so(retrieval):
    _, stub, embedder = retrieval
    embedder.down = True
    try:
        resp = await search(stub, "제주도 여행")
        assert resp.degraded and resp.mode == pb.SEARCH_MODE_KEYWORD and resp.hits[0].id == "b6"
        await expect_code(search(stub, "제주도 여행", mode=pb.SEARCH_MODE_DENSE), grpc.StatusCode.UNAVAILABLE)
    finally:
        embedder.down = False


async def test_bad_input_is_invalid_argument_with_fields_and_nothing_written(retrieval):
    svc, stub, _ = retrieval
    cases = [
        (pb.SearchRequest(collection="books", query="   "), "query"),
        (pb.SearchRequest(collection="books", query="책", top_k=101), "top_k"),
        (pb.SearchRequest(collection="books", query="책", query_vector=[0.1] * 10), "query_vector"),
        (pb.SearchRequest(collection="books", query="책", filter=pb.Filter(must=[pb.Condition(field="color",
                                                                                          keyword="red")])),
         "filter.must[0].field"),
        (pb.SearchRequest(collection="books", query="책", filter=pb.Filter(must=[pb.Condition(field="price",
                                                                                          keyword="싸다")])),
         "filter.must[0]"),
    ]
    for req, field in cases:
        err = await expect_code(stub.Search(req, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
        assert field in [v.field for v in err.violations], (field, err.violations)
    before = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection.documents
    bad_batch = documents([("n1", "새 책", "소설", 1000, True), ("n1", "중복 id", "소설", 1000, True)])
    bad_batch.append(pb.Document(id="", text="id 없음"))
    err = await expect_code(stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="books", documents=bad_batch),
                                                 timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
    assert {"documents[1].id", "documents[2].id"} <= {v.field for v in err.violations}
    after = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection.documents
    assert before == after
    await expect_code(stub.Search(pb.SearchRequest(collection="nope", query="책"), timeout=10),
                      grpc.StatusCode.NOT_FOUND)
    await expect_code(stub.CreateCollection(pb.CreateCollectionRequest(name="books"), timeout=10),
                      grpc.StatusCode.ALREADY_EXISTS)


async def test_revision_mismatch_is_refused_for_writes_and_degrades_search(retrieval):
    _, stub, embedder = retrieval
    embedder.revision_override = "me5s-some-other-model"
    try:
        await expect_code(stub.UpsertDocuments(pb.UpsertDocumentsRequest(
            collection="books", documents=documents([("x1", "다른 모델", "소설", 1, True)])), timeout=10),
            grpc.StatusCode.FAILED_PRECONDITION)
        resp = await search(stub, "제주도 여행")
        assert resp.degraded and resp.mode == pb.SEARCH_MODE_KEYWORD
    finally:
        embedder.revision_override = None


async def test_upsert_is_idempotent_delete_works_and_stream_reports_progress(retrieval):
    _, stub, _ = retrieval
    info = lambda: stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)  # noqa: E731
    base = (await info()).collection.documents
    extra = documents([("s1", "겨울 캠핑 장비 체크리스트", "여행", 9000, True),
                       ("s2", "봄 소풍 도시락 요리책", "요리", 11000, True)])

    async def batches():
        yield pb.UpsertDocumentsStreamRequest(collection="books", documents=extra[:1])
        yield pb.UpsertDocumentsStreamRequest(collection="books", documents=[pb.Document(id="bad", text=" ")])
        yield pb.UpsertDocumentsStreamRequest(collection="books", documents=extra)

    events = [e async for e in stub.UpsertDocumentsStream(batches(), timeout=60)]
    assert [e.WhichOneof("event") for e in events] == ["progress", "progress", "progress", "summary"]
    assert events[1].progress.error and events[2].progress.total_upserted == 3
    assert (events[-1].summary.batches, events[-1].summary.failed_batches) == (3, 1)
    assert (await info()).collection.documents == base + 2  # s1 written twice, stored once
    await stub.DeleteDocuments(pb.DeleteDocumentsRequest(collection="books", ids=["s1", "s2", "never-existed"]),
                               timeout=10)
    assert (await info()).collection.documents == base


async def test_reindex_swaps_alias_while_searches_keep_answering(retrieval):
    _, stub, _ = retrieval
    before = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    stop = asyncio.Event()
    answers, failures = [], []

    async def keep_searching():
        while not stop.is_set():
            try:
                resp = await search(stub, "제주도 여행")
                answers.append(resp.hits[0].id)
            except grpc.aio.AioRpcError as err:  # pragma: no cover - recorded for the assertion
                failures.append(err.code())
            await asyncio.sleep(0)

    searcher = asyncio.ensure_future(keep_searching())
    events = [e async for e in stub.Reindex(pb.ReindexRequest(collection="books", batch_size=3), timeout=120)]
    swapped = len(answers)
    await eventually_async(lambda: len(answers), lambda n: n >= swapped + 3, timeout_s=10, every_s=0.005,
                           what="searches answered after the swap")
    stop.set()
    await searcher
    summary = events[-1].summary
    assert events[-1].WhichOneof("event") == "summary" and events[0].progress.total == before.documents
    assert summary.previous_collection == before.collection and summary.collection != before.collection
    after = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    assert after.collection == summary.collection and after.documents == before.documents
    assert not failures and len(answers) > 3 and set(answers) == {"b6"}


async def test_typed_client_reports_the_services_timings(retrieval):
    """What the benches read through clients/retrieval.py: search, per-batch write and reindex timings."""
    svc, _, _ = retrieval
    async with AsyncRetrievalClient(f"127.0.0.1:{svc.port}", timeout_s=30) as client:
        created = await client.create_collection("timed", {})
        try:
            batches = [[Document("t1", "겨울 캠핑 장비 체크리스트")], [Document("bad", " ")],
                       [Document("t2", "봄 소풍 도시락 요리책"), Document("t3", "제주도 올레길 여행 지도")]]
            events = [e async for e in client.upsert_stream("timed", batches)]
            written = [e for e in events if isinstance(e, BatchWritten)]
            assert [e.timings is None for e in written] == [False, True, False] and written[1].error
            assert all(e.timings.embed_ns > 0 and e.timings.write_ns > 0 for e in written if e.timings)
            summary = events[-1]
            assert isinstance(summary, WriteSummary) and summary.upserted == 3 and summary.total_ns > 0

            by_text = await client.search("timed", "제주도 여행", top_k=2)
            assert by_text.hits[0].id == "t3" and by_text.timings.embed_ns > 0 and by_text.timings.search_ns > 0
            vector = QueryVector([0.05] * 384, created.embedding_revision)
            given = await client.search("timed", "제주도 여행", mode="dense", vector=vector)
            assert given.timings.embed_ns == 0 and given.timings.total_ns >= given.timings.search_ns > 0

            steps = [e async for e in client.reindex("timed", batch_size=2)]
            done = steps[-1]
            assert isinstance(done, ReindexSummary) and done.documents == 3 and done.total_ns > 0
        finally:
            await client.delete_collection("timed")


async def test_failed_reindex_leaves_the_old_collection_serving(retrieval):
    _, stub, embedder = retrieval
    before = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    embedder.down = True
    try:
        await expect_code(_drain(stub.Reindex(pb.ReindexRequest(collection="books"), timeout=60)),
                          grpc.StatusCode.UNAVAILABLE)
    finally:
        embedder.down = False
    after = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    assert after.collection == before.collection and after.documents == before.documents
    assert (await search(stub, "제주도 여행")).hits[0].id == "b6"


async def _drain(call):
    return [e async for e in call]


async def test_persistent_local_path_survives_a_restart(embedding_service, tmp_path):
    for attempt in range(2):
        async with retrieval_stub(tmp_path / "q", embedding_service.port) as (_, stub):
            if attempt == 0:
                await stub.CreateCollection(pb.CreateCollectionRequest(name="kept", fields=FIELDS), timeout=30)
                await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="kept", documents=documents()),
                                           timeout=30)
            else:
                resp = await stub.Search(pb.SearchRequest(collection="kept", query="제주도 여행"), timeout=10)
                assert resp.hits[0].id == "b6"



async def test_a_large_write_is_embedded_in_bounded_calls_with_vectors_in_order(embedding_service, tmp_path_factory):
    from services.retrieval.prepare import EMBED_TEXTS as WRITE_EMBED_TEXTS

    class Counting(GrpcEmbedder):
        sizes: list[int] = []

        async def embed(self, texts, kind, timeout_s):
            self.sizes.append(len(texts))
            return await super().embed(texts, kind, timeout_s)

    embedder = Counting(f"127.0.0.1:{embedding_service.port}")
    docs = [pb.Document(id=f"w{i}", text=f"{i}번 문서: 제주도 여행 안내" if i != 37 else "백엔드 개발자 면접 질문")
            for i in range(40)]
    async with retrieval_stub(tmp_path_factory.mktemp("bounded"), embedding_service.port, embedder=embedder) as (
            _, stub):
        await stub.CreateCollection(pb.CreateCollectionRequest(name="many"), timeout=30)
        Counting.sizes.clear()
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="many", documents=docs), timeout=60)
        assert Counting.sizes == [WRITE_EMBED_TEXTS, WRITE_EMBED_TEXTS, 40 - 2 * WRITE_EMBED_TEXTS]
        out = await stub.Search(pb.SearchRequest(collection="many", query="개발자 면접", mode=pb.SEARCH_MODE_DENSE,
                                                 top_k=1),
                                timeout=10)
        assert out.hits[0].id == "w37"  # each vector stayed with its document across the calls
