"""Several queries in one search, over the real embedding and retrieval servers (port 0).

The fixtures ``http`` (the gateway with collection "gw", GATEWAY_DOCS) and ``retrieval_port`` are in
tests/service/conftest.py.
"""

import pytest

from clients.embedding import AsyncEmbeddingClient
from support.apps import asgi_client, gateway_app

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_queries_are_merged_and_each_hit_names_its_queries(http):
    r = await http.post("/v1/search", json={"collection": "gw", "queries": ["비 오는 날 소설", "제주도 여행 책"],
                                            "top_k": 3})
    assert r.status_code == 200, r.text
    out = r.json()
    assert [q["query"] for q in out["queries"]] == ["비 오는 날 소설", "제주도 여행 책"]
    assert all(q["source"] == "given" and q["mode"] == "hybrid" and not q["degraded"] for q in out["queries"])
    by_id = {h["id"]: h for h in out["hits"]}
    # each query's best document is in the merged list and names that query first
    assert by_id["g1"]["matched_queries"][0] == 0 or 0 in by_id["g1"]["matched_queries"]
    assert 1 in by_id["g3"]["matched_queries"]
    assert {out["hits"][0]["id"], out["hits"][1]["id"]} == {"g1", "g3"}
    scores = [h["score"] for h in out["hits"]]
    assert scores == sorted(scores, reverse=True) and len({h["id"] for h in out["hits"]}) == len(out["hits"])
    assert "RRF across queries" in out["fusion_reason"]


async def test_one_query_in_queries_ranks_as_query(http):
    single = (await http.post("/v1/search", json={"collection": "gw", "query": "개발자 면접"})).json()
    listed = (await http.post("/v1/search", json={"collection": "gw", "queries": ["개발자 면접"]})).json()
    assert [h["id"] for h in listed["hits"]] == [h["id"] for h in single["hits"]]
    assert single["queries"] is None and len(listed["queries"]) == 1


async def test_several_queries_are_one_embed_call_and_then_cached(embedding_service, retrieval_port, http):
    calls: list[int] = []

    class Counting(AsyncEmbeddingClient):
        async def embed(self, texts, kind, **kw):  # the real call, counted
            calls.append(len(texts))
            return await super().embed(texts, kind, **kw)

    app = gateway_app(embedding_service.port, retrieval_port)
    async with asgi_client(app) as client:
        mesh = app.state.mesh
        mesh.vectors.client = Counting(f"localhost:{embedding_service.port}")
        body = {"collection": "gw", "queries": ["겨울 여행지 추천", "면접 질문 정리", "장편 소설 한 권"]}
        first = (await client.post("/v1/search", json=body)).json()
        assert calls == [3] and not first["timings"]["cache_hit"]
        second = (await client.post("/v1/search", json={**body, "queries": body["queries"] + ["새 질문 하나"]})).json()
        assert calls == [3, 1]  # only the new query is embedded
        assert [q["cache_hit"] for q in second["queries"]] == [True, True, True, False]
        # /v1/embeddings shares the cache for queries: nothing new to embed
        model = (await client.get("/v1/models")).json()["data"][1]["id"]
        emb = await client.post("/v1/embeddings", json={"model": model, "input": body["queries"]})
        assert emb.status_code == 200, emb.text
        assert calls == [3, 1] and emb.json()["usage"]["prompt_tokens"] == 0 and len(emb.json()["data"]) == 3
        await mesh.vectors.client.close()


async def test_embedding_down_degrades_every_leg(embedding_service, retrieval_port, http):
    from support import free_port

    app = gateway_app(free_port(), retrieval_port)  # nothing listens there
    async with asgi_client(app) as client:
        r = await client.post("/v1/search", json={"collection": "gw", "queries": ["제주도 여행", "면접 질문"]})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["degraded"] and all(q["degraded"] and q["mode"] == "keyword" for q in out["queries"])
        assert {h["id"] for h in out["hits"]} >= {"g2", "g3"}
        assert r.headers["X-Mesh-Degraded"] == "1"


@pytest.mark.parametrize("body, field", [
    ({"collection": "gw", "queries": []}, "queries"),
    ({"collection": "gw", "queries": [f"질문 {i}" for i in range(9)]}, "queries"),
    ({"collection": "gw", "queries": ["제주도 여행", " 제주도  여행 "]}, "queries"),
    ({"collection": "gw", "queries": ["제주도", ""]}, "queries[1]"),
    ({"collection": "gw"}, "query"),
    ({"collection": "gw", "query": "책", "queries": ["책"]}, "query"),
    ({"collection": "gw", "queries": ["책"], "expand": {"n": 3}}, "expand"),
    ({"collection": "gw", "query": "책", "expand": {"n": 9}}, "expand.n"),
    ({"collection": "nope", "queries": ["책", "여행"]}, None),
])
async def test_bad_queries_are_a_4xx_naming_the_field(http, body, field):
    r = await http.post("/v1/search", json=body)
    assert r.status_code == (404 if field is None else 400), r.text
    if field is not None:
        fields = [f["field"] for f in r.json()["error"]["fields"]]
        assert field in fields, fields
        if body.get("queries") and len(body["queries"]) == 2 and body["queries"][1].strip():
            assert "repeats queries[0]" in r.text
