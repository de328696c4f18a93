"""A model upgrade on the retrieval service (issue 50): two embedding instances side by side, a reindex to the
other revision behind the quality gate, writes kept in both versions during the grace period, and a rollback.

Three real embedding services over the built model: the default one, one labelled "next" (the same weights
counted as another model's revision: a gate between them is a tie) and one labelled "worse" whose engine is
the real one with its vectors replaced by noise (a fault-injection stand-in for a worse model: the gate must
refuse it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np
import pytest
import pytest_asyncio
from mesh.retrieval.v1 import retrieval_pb2 as pb

from services.embedding.engine.base import EmbeddingEngine
from support import job_finished
from support.apps import asgi_client, gateway_app
from support.servers import retrieval_stub, running_embedding

DOCS = [
    ("b1", "비 오는 날 읽기 좋은 장편소설"),
    ("b2", "백엔드 개발자 기술 면접 질문 모음"),
    ("b3", "제주도 올레길 여행 가이드북"),
    ("b4", "초보자를 위한 파이썬 프로그래밍 입문서"),
    ("b5", "부모님께 드리는 건강 관리 안내서"),
    ("b6", "아이와 함께 읽는 그림 동화책"),
    ("b7", "주식 투자와 경제 공부의 기초"),
    ("b8", "한식 집밥 요리 레시피 백과"),
    ("b9", "캠핑 장비 고르는 법과 야영 요령"),
    ("b10", "마음을 다스리는 명상과 심리 에세이"),
]
GATE = [("개발자 면접 준비", ["b2"]), ("제주 여행 책", ["b3"]), ("파이썬 코딩 배우기", ["b4"]),
        ("어린이 동화", ["b6"]), ("요리 레시피", ["b8"]), ("캠핑 용품", ["b9"])]


class NoisyEngine(EmbeddingEngine):
    """The real engine with its vectors replaced by seeded noise: stands for a worse model (injection only)."""

    name = "noisy"

    def __init__(self, real: EmbeddingEngine) -> None:
        self.real = real
        self.precision = real.precision
        self.rng = np.random.default_rng(7)

    def encode_core(self, batch):  # noqa: D102
        out = self.real.encode_core(batch)
        noise = self.rng.standard_normal(out.shape).astype(np.float32)
        return noise / np.linalg.norm(noise, axis=1, keepdims=True)


def gate(queries=GATE, margin=None) -> pb.QualityGate:
    g = pb.QualityGate(queries=[pb.GateQuery(query=q, relevant_ids=ids) for q, ids in queries])
    if margin is not None:
        g.margin = margin
    return g


async def events(stub, **kw):
    return [e async for e in stub.Reindex(pb.ReindexRequest(collection="books", **kw), timeout=120)]


async def dense(stub, query, top_k=3):
    return await stub.Search(pb.SearchRequest(collection="books", query=query, mode=pb.SEARCH_MODE_DENSE,
                                              top_k=top_k), timeout=10)


@dataclass
class Mesh:
    stub: Any
    base: str
    nxt: str
    worse: str
    first_port: int
    second_port: int
    retrieval_port: int

    def __iter__(self):
        return iter((self.stub, self.base, self.nxt, self.worse))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mesh(model_dir, tmp_path_factory):
    from services.embedding.server import make_engine
    from support.embedding import embedding_settings

    worse = NoisyEngine(make_engine(embedding_settings(model_dir)))
    async with running_embedding(model_dir) as first, \
            running_embedding(model_dir, revision_label="next") as second, \
            running_embedding(model_dir, revision_label="worse", engine=worse) as third, \
            retrieval_stub(tmp_path_factory.mktemp("upgrade"), first.port, rollback_grace_s=60,
                           more_embedding_targets=f"127.0.0.1:{second.port},127.0.0.1:{third.port}") as (svc, stub):
        for name in ("books", "shelf"):
            await stub.CreateCollection(pb.CreateCollectionRequest(name=name), timeout=30)
            await stub.UpsertDocuments(pb.UpsertDocumentsRequest(
                collection=name, documents=[pb.Document(id=i, text=t) for i, t in DOCS]), timeout=60)
        yield Mesh(stub, first.embedder.revision, second.embedder.revision, third.embedder.revision,
                   first.port, second.port, svc.port)


async def test_the_revisions_served_and_bad_upgrades_are_refused_before_any_work(mesh):
    stub, base, nxt, worse = mesh
    listed = await stub.ListRevisions(pb.ListRevisionsRequest(), timeout=10)
    assert [r.revision for r in listed.revisions] == [base, nxt, worse]
    assert nxt == base + "+next" and {r.dim for r in listed.revisions} == {384}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await events(stub, embedding_revision="no-such-model", validate_only=True)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no-such-model" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await events(stub, embedding_revision=nxt, gate=gate([("면접", ["b2", "nope"])]), validate_only=True)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'nope'" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Rollback(pb.RollbackRequest(name="books"), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Rollback(pb.RollbackRequest(name="unknown"), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert await events(stub, embedding_revision=nxt, gate=gate(), validate_only=True) == []


async def test_an_embed_request_naming_another_revision_is_refused_not_answered_with_other_vectors(mesh):
    from clients import AsyncEmbeddingClient
    from clients.errors import MeshClientError

    async with AsyncEmbeddingClient(f"127.0.0.1:{mesh.second_port}") as client:
        assert (await client.embed(["제주 여행"], revision=mesh.nxt)).model_revision == mesh.nxt
        assert (await client.embed(["제주 여행"])).model_revision == mesh.nxt  # naming none: whatever it serves
        with pytest.raises(MeshClientError) as err:
            await client.embed(["제주 여행"], revision=mesh.base)
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and mesh.nxt in err.value.message


async def test_a_worse_model_is_refused_by_the_gate_and_the_old_version_keeps_serving(mesh):
    stub, base, _, worse = mesh
    before = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    seen = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for e in stub.Reindex(pb.ReindexRequest(collection="books", embedding_revision=worse, gate=gate()),
                                    timeout=120):
            seen.append(e)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "quality gate" in err.value.details()
    verdict = next(e.gate for e in seen if e.WhichOneof("event") == "gate")
    assert not verdict.passed and verdict.old_revision == base and verdict.new_revision == worse
    # ten documents: every version finds each one in its top 10 (recall 1.0); the ranks tell them apart
    assert verdict.old_ndcg > verdict.new_ndcg + verdict.margin and verdict.queries == len(GATE)
    after = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    assert (after.collection, after.embedding_revision) == (before.collection, base)
    out = await dense(stub, "개발자 면접 준비")
    assert not out.degraded and out.hits[0].id == "b2"


async def test_an_equal_model_swaps_keeps_writes_in_both_versions_and_rolls_back_without_re_embedding(mesh):
    stub, base, nxt, _ = mesh
    before = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    seen = await events(stub, embedding_revision=nxt, gate=gate())
    summary = seen[-1].summary
    assert summary.embedding_revision == nxt and summary.gate.passed and summary.kept_collection == before.collection
    assert summary.gate.new_recall == pytest.approx(summary.gate.old_recall, abs=1e-6)
    info = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    assert info.embedding_revision == nxt and info.previous_collection == before.collection
    assert info.previous_embedding_revision == base and info.rollback_until > time.time() + 30
    out = await dense(stub, "제주 여행 책")
    assert not out.degraded and out.hits[0].id == "b3"  # the query embedded by the instance serving "next"
    # Writes since the upgrade go to both versions, each embedded by its own model.
    await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="books", documents=[
        pb.Document(id="b11", text="겨울 스키 여행 리조트 안내")]), timeout=30)
    await stub.DeleteDocuments(pb.DeleteDocumentsRequest(collection="books", ids=["b10"]), timeout=10)
    start = time.perf_counter()
    back = await stub.Rollback(pb.RollbackRequest(name="books"), timeout=10)
    took = time.perf_counter() - start
    assert back.collection.collection == before.collection and back.collection.embedding_revision == base
    assert back.removed_collection == info.collection and back.collection.previous_collection == ""
    assert took < 1.0
    out = await dense(stub, "스키 리조트", top_k=1)
    assert not out.degraded and out.hits[0].id == "b11"
    assert "b10" not in [h.id for h in (await dense(stub, "명상 심리 에세이", top_k=10)).hits]
    with pytest.raises(grpc.aio.AioRpcError) as err:  # nothing kept any more
        await stub.Rollback(pb.RollbackRequest(name="books"), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_the_kept_version_goes_at_the_end_of_its_grace_period(mesh):
    stub, base, nxt, _ = mesh
    seen = await events(stub, embedding_revision=nxt, grace_s=0.5)
    assert seen[-1].summary.kept_collection and seen[-1].summary.gate.queries == 0
    await asyncio.sleep(1.0)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Rollback(pb.RollbackRequest(name="books"), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "grace period" in err.value.details()
    info = (await stub.GetCollection(pb.GetCollectionRequest(name="books"), timeout=10)).collection
    assert info.previous_collection == "" and info.embedding_revision == nxt
    # back to the default model (an upgrade again), no gate, nothing kept
    seen = await events(stub, embedding_revision=base, grace_s=0)
    assert seen[-1].summary.embedding_revision == base


async def test_the_rest_routes_upgrade_behind_the_gate_search_each_collection_with_its_model_and_roll_back(mesh):
    """The gateway over both instances: "shelf" upgraded to "next" while "books" stays on its own revision."""
    app = gateway_app(mesh.first_port, mesh.retrieval_port, more_embedding_targets=f"127.0.0.1:{mesh.second_port}",
                      allow_no_auth=True)
    async with asgi_client(app) as http:
        bad = await http.post("/v1/collections/shelf/upgrade", json={"embedding_revision": "no-such-model"})
        assert bad.status_code == 400 and bad.json()["error"]["fields"][0]["field"] == "embedding_revision"
        bad = await http.post("/v1/collections/shelf/upgrade", json={
            "embedding_revision": mesh.nxt, "gate": {"queries": [{"query": "면접", "relevant_ids": ["zz"]}]}})
        assert bad.status_code == 400 and "zz" in bad.text
        assert (await http.post("/v1/collections/nope/upgrade", json={"embedding_revision": mesh.nxt})).status_code \
            == 404
        assert (await http.post("/v1/collections/shelf/rollback")).status_code == 409
        assert (await http.post("/v1/collections/nope/rollback")).status_code == 404
        refused = await http.post("/v1/collections/shelf/upgrade", json={
            "embedding_revision": mesh.worse,
            "gate": {"queries": [{"query": q, "relevant_ids": ids} for q, ids in GATE]}})
        job = await job_finished(http, f"/v1/jobs/{refused.json()['id']}")
        assert job["state"] == "failed" and job["kind"] == "reindex" and "quality gate" in job["errors"][-1]
        assert not job["result"]["gate"]["passed"] and job["result"]["gate"]["new_revision"] == mesh.worse
        started = await http.post("/v1/collections/shelf/upgrade", json={
            "embedding_revision": mesh.nxt, "gate": {"queries": [{"query": q, "relevant_ids": ids} for q, ids in GATE],
                                                     "margin": 0.0}})
        job = await job_finished(http, f"/v1/jobs/{started.json()['id']}")
        assert job["state"] == "succeeded" and job["result"]["gate"]["passed"], job
        info = (await http.get("/v1/collections/shelf")).json()
        assert info["embedding_revision"] == mesh.nxt and info["previous_collection"] == job["result"][
            "previous_collection"]
        # Each collection is searched with its own model's query vector, embedded by the gateway.
        for name, revision in (("shelf", mesh.nxt), ("books", (await http.get("/v1/collections/books")).json()[
                "embedding_revision"])):
            out = await http.post("/v1/search", json={"collection": name, "query": "캠핑 용품", "mode": "dense"})
            assert out.status_code == 200 and not out.json()["degraded"], out.text
            assert out.json()["hits"][0]["id"] == "b9"
            found = await app.state.mesh.search.sources.serving(revision, _deadline())
            assert found is not None and found.revision == revision
        back = await http.post("/v1/collections/shelf/rollback")
        assert back.status_code == 200 and back.json()["collection"]["embedding_revision"] == mesh.base
        assert back.json()["collection"]["previous_collection"] is None and back.json()["took_ms"] < 1000
        # The gateway still holds "next" for shelf for a few seconds: retrieval refuses that vector and the
        # search is sent again without one (never answered with the other model's vector, never keyword-only).
        out = await http.post("/v1/search", json={"collection": "shelf", "query": "캠핑 용품"})
        assert out.status_code == 200 and not out.json()["degraded"] and out.json()["hits"][0]["id"] == "b9"


def _deadline():
    from gateway.http.deadline import Deadline

    return Deadline(5.0)
