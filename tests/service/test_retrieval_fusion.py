"""Fusion per request, the query vector's revision, determinism across restarts and engines, units.

The real retrieval server (Qdrant Edge in a folder, or qdrant-client local mode) with the real
embedding server, both on port 0.
"""

import grpc
import pytest
from mesh.retrieval.v1 import retrieval_pb2 as pb

from support.servers import retrieval_stub

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Written for these tests: near-duplicates and shared words so that fused scores tie; s11 repeats s8's text
# word for word, so score-based fusions tie on it whatever the analyser or the model does.
SHOP = [
    ("s1", "생수 2리터 6개 묶음, 가벼운 페트병"),
    ("s2", "생수 500밀리리터 20개 묶음"),
    ("s3", "미국식 우유 1갤런 대용량 팩"),
    ("s4", "탄산수 1리터 12개, 레몬 향"),
    ("s5", "여행용 접이식 물병 750밀리리터"),
    ("s6", "캠핑용 물통 10리터, 수도꼭지 달림"),
    ("s7", "보리차 티백 100개입 대용량"),
    ("s8", "유리 물병 1리터, 냉장고 문에 쏙 들어가는 크기"),
    ("s9", "책 3권 세트: 물과 건강에 관한 교양서"),
    ("s10", "분유 800그램 2개 묶음"),
    ("s11", "유리 물병 1리터, 냉장고 문에 쏙 들어가는 크기"),
]
QUERIES = ["리터는 몇 갤런인가요?", "대용량 물", "물병 추천", "우유 1갤런", "캠핑 갈 때 마실 물 담는 통", "2리터 생수"]
FUSIONS = [pb.FUSION_METHOD_UNSPECIFIED, pb.FUSION_METHOD_AUTO, pb.FUSION_METHOD_RRF, pb.FUSION_METHOD_DBSF,
           pb.FUSION_METHOD_WEIGHTED]


async def fill(stub, name="shop"):
    await stub.CreateCollection(pb.CreateCollectionRequest(name=name), timeout=30)
    await stub.UpsertDocuments(pb.UpsertDocumentsRequest(
        collection=name, documents=[pb.Document(id=i, text=t) for i, t in SHOP]), timeout=60)


async def every_answer(stub):
    out = []
    for query in QUERIES:
        for fusion in FUSIONS:
            resp = await stub.Search(pb.SearchRequest(collection="shop", query=query, top_k=10,
                                                      fusion=pb.Fusion(method=fusion)), timeout=10)
            out.append((query, fusion, resp.fusion, resp.fusion_reason,
                        [(h.id, h.score, h.dense.rank, h.keyword.rank) for h in resp.hits]))
    return out


async def test_same_results_bit_for_bit_after_a_restart_and_the_same_order_on_the_other_engine(
        embedding_service, tmp_path):
    async with retrieval_stub(tmp_path / "edge", embedding_service.port) as (_, stub):
        await fill(stub)
        before = await every_answer(stub)
    async with retrieval_stub(tmp_path / "edge", embedding_service.port) as (_, stub):
        after = await every_answer(stub)
    assert after == before
    ties = [hits for *_, hits in before if len({s for _, s, *_ in hits}) < len(hits)]
    assert ties, "the catalog should produce tied fused scores, or the test proves nothing about ties"
    async with retrieval_stub(tmp_path / "client", embedding_service.port, qdrant_engine="client") as (_, stub):
        await fill(stub)
        other = await every_answer(stub)
    assert [[h[0] for h in hits] for *_, hits in other] == [[h[0] for h in hits] for *_, hits in before]


async def test_fusion_is_chosen_per_request_and_the_response_says_why(embedding_service, tmp_path):
    async with retrieval_stub(tmp_path / "q", embedding_service.port) as (_, stub):
        await fill(stub)
        default = await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물"), timeout=10)
        assert default.fusion == pb.FUSION_METHOD_AUTO and default.fusion_reason.startswith("auto: ")
        assert "dense weight" in default.fusion_reason
        rrf = await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물",
                                                 fusion=pb.Fusion(method=pb.FUSION_METHOD_RRF, rrf_k=5)), timeout=10)
        assert rrf.fusion == pb.FUSION_METHOD_RRF and rrf.fusion_reason == "requested rrf (k 5)"
        assert rrf.hits[0].score == pytest.approx(sum(1 / (5 + r) for r in (rrf.hits[0].dense.rank,
                                                                             rrf.hits[0].keyword.rank) if r))
        keyword = await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물",
                                                     mode=pb.SEARCH_MODE_KEYWORD), timeout=10)
        assert keyword.fusion == pb.FUSION_METHOD_UNSPECIFIED and keyword.fusion_reason == ""


async def test_a_query_vector_needs_the_collections_revision(embedding_service, tmp_path):
    from clients import AsyncEmbeddingClient

    async with retrieval_stub(tmp_path / "q", embedding_service.port) as (_, stub):
        await fill(stub)
        revision = (await stub.GetCollection(pb.GetCollectionRequest(name="shop"), timeout=10)
                    ).collection.embedding_revision
        async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
            vec = (await client.embed(["대용량 물"], "query")).vectors[0].tolist()
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물", query_vector=vec), timeout=10)
        assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "query_vector_revision" in missing.value.details() and revision in missing.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as other:
            await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물", query_vector=vec,
                                               query_vector_revision="me5s-other-000000000000"), timeout=10)
        assert other.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "me5s-other-000000000000" in other.value.details() and revision in other.value.details()
        given = await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물", query_vector=vec,
                                                   query_vector_revision=revision), timeout=10)
        embedded = await stub.Search(pb.SearchRequest(collection="shop", query="대용량 물"), timeout=10)
        assert [h.id for h in given.hits] == [h.id for h in embedded.hits] and given.timings.embed_ns == 0


async def test_units_are_found_by_keyword_and_an_old_profile_collection_is_refused(embedding_service, tmp_path):
    folder = tmp_path / "q"
    async with retrieval_stub(folder, embedding_service.port, term_profile="nouns+predicates") as (_, stub):
        await fill(stub)
        old = await stub.Search(pb.SearchRequest(collection="shop", query="리터는 몇 갤런인가요?",
                                                 mode=pb.SEARCH_MODE_KEYWORD), timeout=10)
        assert not old.hits  # the old profile drops 리터 and 갤런 (tagged NNB)
    async with retrieval_stub(folder, embedding_service.port) as (_, stub):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Search(pb.SearchRequest(collection="shop", query="리터", mode=pb.SEARCH_MODE_KEYWORD),
                              timeout=10)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        details = refused.value.details()
        assert "/nouns+predicates;" in details and "/nouns+predicates+units#" in details and "reindex" in details
        done = [e async for e in stub.Reindex(pb.ReindexRequest(collection="shop"), timeout=120)]
        assert done[-1].HasField("summary")
        found = await stub.Search(pb.SearchRequest(collection="shop", query="리터는 몇 갤런인가요?",
                                                   mode=pb.SEARCH_MODE_KEYWORD), timeout=10)
        ids = {h.id for h in found.hits}
        # Every passage with 리터 or 갤런 (밀리리터 is analysed as 밀리 + 리터); none without.
        assert {"s1", "s3", "s4", "s6", "s8"} <= ids and not ids & {"s7", "s9", "s10"}
