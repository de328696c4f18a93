"""Long documents as passages through the real retrieval server (Qdrant Edge on disk, the real embedding service).

A long document is found by a passage far past its first page, in both legs, one hit per document
by default and every passage on request; rewrites and deletes take every passage; a collection
written before passages is served as it was and a reindex moves it to passages.
"""

from __future__ import annotations

import pytest
from mesh.retrieval.v1 import retrieval_pb2 as pb

from support.servers import retrieval_stub

pytestmark = pytest.mark.asyncio(loop_scope="session")

FILLER = [
    "이 장에서는 회사의 연혁과 조직 구성을 설명합니다.",
    "분기별 매출은 전년 같은 기간보다 조금 늘었습니다.",
    "신입 사원 교육은 매년 삼월에 두 주 동안 진행됩니다.",
    "사내 동호회 활동은 자율적으로 운영되고 있습니다.",
    "복지 제도에는 건강 검진과 자기 계발비 지원이 있습니다.",
    "고객 상담 창구는 평일 오전 아홉 시부터 열립니다.",
]
TARGET = "천체 관측 동아리는 매달 보름에 강원도 산꼭대기에서 망원경으로 토성의 고리를 관찰합니다."


def long_text(target_at: int = 3000, total: int = 6000, target: str = TARGET) -> str:
    """Korean prose of about ``total`` characters with ``target`` starting near ``target_at``."""
    parts, size, i, placed = [], 0, 0, False
    while size < total:
        if not placed and size >= target_at:
            parts.append(target)
            placed = True
        else:
            parts.append(f"{i + 1}항. {FILLER[i % len(FILLER)]}")
            i += 1
        size += len(parts[-1]) + 1
    return " ".join(parts)


SHORT = [("s1", "비 오는 날 읽기 좋은 장편소설"), ("s2", "파이썬 데이터 분석 입문서"),
         ("s3", "제주도 여행 가이드북과 맛집 지도")]


def docs(rows):
    return [pb.Document(id=i, text=t) for i, t in rows]


async def search(stub, query, **kw):
    return await stub.Search(pb.SearchRequest(collection="long", query=query, **kw), timeout=30)


async def test_a_long_document_is_found_by_a_passage_past_its_first_page_one_hit_or_every_passage(
        embedding_service, tmp_path_factory):
    text = long_text()
    async with retrieval_stub(tmp_path_factory.mktemp("passages"), embedding_service.port) as (_, stub):
        info = (await stub.CreateCollection(pb.CreateCollectionRequest(name="long"), timeout=30)).collection
        assert info.layout == "passages:600/100"
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="long", documents=docs(
            [("doc", text), *SHORT])), timeout=120)
        got = (await stub.GetCollection(pb.GetCollectionRequest(name="long"), timeout=10)).collection
        assert got.documents == 4, "a document of several passages counts once"

        for mode in (pb.SEARCH_MODE_DENSE, pb.SEARCH_MODE_KEYWORD, pb.SEARCH_MODE_HYBRID):
            out = await search(stub, "망원경으로 토성 고리를 보는 천체 관측 동아리", mode=mode, top_k=4)
            top = out.hits[0]
            assert top.id == "doc", mode
            assert [h.id for h in out.hits].count("doc") == 1, "one hit per document by default"
            p = top.passage
            assert p.passages > 5 and p.start > 2000, "the passage that matched lies past the first page"
            assert top.text == text and TARGET in text[p.start:p.end] and p.text == text[p.start:p.end]

        out = await search(stub, "망원경으로 토성 고리를 보는 천체 관측 동아리", mode=pb.SEARCH_MODE_DENSE, top_k=5,
                           group_by=pb.GROUP_BY_PASSAGE)
        ords = [h.passage.ordinal for h in out.hits if h.id == "doc"]
        assert len(ords) >= 2 and len(set(ords)) == len(ords), "several passages of one document, each once"
        assert all(h.text == h.passage.text and len(h.text) <= 600 * 1.25 for h in out.hits if h.id == "doc")
        assert TARGET in out.hits[0].text

        short = await search(stub, "제주도 여행 맛집", top_k=1)
        assert short.hits[0].id == "s3" and short.hits[0].passage.passages == 1
        assert short.hits[0].passage.start == 0 and short.hits[0].passage.end == len(SHORT[2][1])

        # Rewritten shorter: the passages it no longer has go; deleted: every passage goes.
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="long", documents=docs(
            [("doc", "짧아진 문서입니다.")])), timeout=60)
        out = await search(stub, "토성 고리 천체 관측", mode=pb.SEARCH_MODE_KEYWORD, top_k=10,
                           group_by=pb.GROUP_BY_PASSAGE)
        assert "doc" not in [h.id for h in out.hits]
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="long", documents=docs([("doc", text)])),
                                   timeout=120)
        await stub.DeleteDocuments(pb.DeleteDocumentsRequest(collection="long", ids=["doc"]), timeout=30)
        out = await search(stub, "토성 고리 천체 관측 동아리 회사 매출 교육", mode=pb.SEARCH_MODE_KEYWORD, top_k=20,
                           group_by=pb.GROUP_BY_PASSAGE)
        assert "doc" not in [h.id for h in out.hits]
        got = (await stub.GetCollection(pb.GetCollectionRequest(name="long"), timeout=10)).collection
        assert got.documents == 3


async def test_a_collection_written_before_passages_is_served_as_it_is_and_a_reindex_moves_it(
        embedding_service, tmp_path_factory):
    folder = tmp_path_factory.mktemp("legacy")
    text = long_text()
    async with retrieval_stub(folder, embedding_service.port, passage_chars=0) as (_, stub):
        info = (await stub.CreateCollection(pb.CreateCollectionRequest(name="long"), timeout=30)).collection
        assert info.layout == "document"
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="long", documents=docs(
            [("doc", text), *SHORT])), timeout=120)
    async with retrieval_stub(folder, embedding_service.port) as (_, stub):  # the new default: passages
        got = (await stub.GetCollection(pb.GetCollectionRequest(name="long"), timeout=10)).collection
        assert got.layout == "document" and got.documents == 4
        await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="long", documents=docs(
            [("doc2", long_text(target="바다 거북은 해마다 같은 모래사장으로 돌아와 알을 낳습니다."))])),
            timeout=120)
        out = await search(stub, "토성 고리 천체 관측", mode=pb.SEARCH_MODE_KEYWORD, top_k=10,
                           group_by=pb.GROUP_BY_PASSAGE)
        assert all(h.passage.passages == 1 and h.passage.start == 0 for h in out.hits), \
            "the old layout keeps one point per document, for old and new writes alike"
        assert out.hits[0].id == "doc" and out.hits[0].text == text

        events = [e async for e in stub.Reindex(pb.ReindexRequest(collection="long"), timeout=300)]
        assert events[-1].summary.documents == 5
        got = (await stub.GetCollection(pb.GetCollectionRequest(name="long"), timeout=10)).collection
        assert got.layout == "passages:600/100" and got.documents == 5
        out = await search(stub, "망원경으로 토성 고리를 보는 천체 관측 동아리", mode=pb.SEARCH_MODE_DENSE, top_k=3)
        assert out.hits[0].id == "doc" and out.hits[0].passage.start > 2000 and out.hits[0].text == text
        out = await search(stub, "바다 거북 알 모래사장", top_k=1)
        assert out.hits[0].id == "doc2" and out.hits[0].passage.passages > 1
