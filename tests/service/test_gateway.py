"""The gateway app over the real embedding and retrieval servers (port 0), driven over HTTP (ASGI).

The fixtures ``retrieval_port`` and ``http`` (the gateway with collection "gw") are in tests/service/conftest.py.
"""

import base64
import json

import numpy as np
import pytest
from openai import AsyncOpenAI, NotFoundError

from clients import AsyncEmbeddingClient
from support import free_port, job_finished
from support.apps import asgi_client, gateway_app
from support.catalogs import GATEWAY_DOCS

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_search_is_hybrid_and_second_call_hits_the_cache(http):
    body = {"collection": "gw", "query": "개발자 면접 준비"}
    first = await http.post("/v1/search", json=body)
    assert first.status_code == 200, first.text
    out = first.json()
    assert out["mode"] == "hybrid" and not out["degraded"] and out["hits"][0]["id"] == "g2"
    assert out["hits"][0]["dense_rank"] == 1 and out["hits"][0]["keyword_rank"] == 1
    second = (await http.post("/v1/search", json=body)).json()
    assert second["timings"]["cache_hit"] and not out["timings"]["cache_hit"]
    assert second["timings"]["embed_ms"] < out["timings"]["embed_ms"]
    assert [h["id"] for h in second["hits"]] == [h["id"] for h in out["hits"]]


async def test_filters_and_collection_info(http):
    r = await http.post("/v1/search", json={"collection": "gw", "query": "책", "filter": {
        "must": [{"field": "price", "lte": 16000}], "must_not": [{"field": "category", "eq": "여행"}]}})
    assert [h["id"] for h in r.json()["hits"]] == ["g1"]
    info = (await http.get("/v1/collections/gw")).json()
    assert info["documents"] == 3 and info["fields"] == {"category": "keyword", "price": "integer"}


@pytest.mark.parametrize("request_body, status, field", [
    ({"collection": "gw", "query": ""}, 400, "query"),
    ({"collection": "gw", "query": "책", "top_k": 0}, 400, "top_k"),
    ({"collection": "gw", "query": "책", "unknown": 1}, 400, "unknown"),
    ({"collection": "gw", "query": "책", "filter": {"must": [{"field": "color", "eq": "red"}]}}, 400,
     "filter.must[0].field"),
    ({"collection": "gw", "query": "책", "filter": {"must": [{"field": "price", "eq": 1, "lte": 3}]}}, 400,
     "filter.must[0]"),
    ({"collection": "nope", "query": "책"}, 404, None),
])
async def test_errors_have_one_body_shape(http, request_body, status, field):
    r = await http.post("/v1/search", json=request_body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"code", "message", "retryable", "fields"}
    if field:
        assert field in [f["field"] for f in err["fields"]], err


async def test_deadline_header_is_validated_and_enforced(http):
    r = await http.post("/v1/search", json={"collection": "gw", "query": "책"}, headers={"X-Request-Timeout-Ms": "x"})
    assert r.status_code == 400
    # 1 ms is spent before retrieval can be called (the budget is checked before every hop): 504, never a 500
    for mode in ("hybrid", "keyword"):
        r = await http.post("/v1/search", json={"collection": "gw", "query": "새로운 질문 하나", "mode": mode},
                            headers={"X-Request-Timeout-Ms": "1"})
        assert r.status_code == 504, r.text
        assert r.json()["error"]["code"] == "deadline_exceeded" and r.json()["error"]["retryable"]


async def test_an_embedding_share_too_short_degrades_to_keyword_without_tripping_the_breaker(
        http, embedding_service, retrieval_port):  # http: the collection exists
    # 0.0001 of 2 s is 0.2 ms for the embedding hop: less than an empty gRPC round trip (~0.5 ms here), so no
    # answer can arrive in time; retrieval still has its time
    app = gateway_app(embedding_service.port, retrieval_port, embed_budget_share=0.0001, breaker_failures=1)
    async with asgi_client(app) as client:
        for i in range(2):
            r = await client.post("/v1/search", json={"collection": "gw", "query": f"제주도 여행 {i}"})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["degraded"] and out["mode"] == "keyword" and out["hits"][0]["id"] == "g3"
        assert app.state.mesh.vectors.breaker.state == "closed"  # a short budget says nothing of its health


async def test_openai_client_gets_float_and_base64_embeddings(http, embedding_service):

    client = AsyncOpenAI(api_key="unused", base_url="http://gw/v1", http_client=http)
    models = await client.models.list()
    model_id = models.data[0].id
    assert model_id == "intfloat/multilingual-e5-small"
    pair = await client.embeddings.create(model=model_id, input=["한국어 문장", "두 번째"])  # base64 by default
    assert len(pair.data) == 2 and [d.index for d in pair.data] == [0, 1] and len(pair.data[0].embedding) == 384
    # Same single input both ways (int8 dynamic quantisation scales activations per batch, so a
    # text's vector varies slightly with its batch mates; compare like with like).
    b64 = await client.embeddings.create(model=model_id, input="한국어 문장")
    flt = await client.embeddings.create(model=model_id, input="한국어 문장", encoding_format="float")
    np.testing.assert_allclose(b64.data[0].embedding, flt.data[0].embedding, atol=1e-6)
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as direct:
        want = (await direct.embed(["한국어 문장"], "passage")).vectors[0]
    np.testing.assert_allclose(flt.data[0].embedding, want, atol=1e-6)
    assert b64.usage.prompt_tokens > 0
    raw = await http.post("/v1/embeddings", json={"model": model_id, "input": "x", "encoding_format": "base64"})
    vec = np.frombuffer(base64.b64decode(raw.json()["data"][0]["embedding"]), dtype="<f4")
    assert vec.shape == (384,)
    bad = await http.post("/v1/embeddings", json={"model": "gpt-4", "input": "x"})
    assert bad.status_code == 404


async def test_embedding_down_degrades_to_keyword_and_breaker_stops_waiting(retrieval_port):
    dead = f"127.0.0.1:{free_port()}"
    app = gateway_app(dead, retrieval_port, breaker_failures=2, breaker_reset_s=60)
    async with asgi_client(app) as client:
        outs = []
        for _ in range(4):
            r = await client.post("/v1/search", json={"collection": "gw", "query": "제주도 여행"})
            assert r.status_code == 200, r.text
            outs.append(r.json())
        assert all(o["degraded"] and o["mode"] == "keyword" and o["hits"][0]["id"] == "g3" for o in outs)
        assert app.state.mesh.vectors.breaker.state == "open"
        dense = await client.post("/v1/search", json={"collection": "gw", "query": "제주", "mode": "dense"})
        assert dense.status_code == 503 and dense.json()["error"]["retryable"]
        metrics = (await client.get("/metrics")).text
        assert "mesh_gateway_search_degraded_total" in metrics


async def test_api_key_and_body_limit(embedding_service, retrieval_port):
    app = gateway_app(embedding_service.port, retrieval_port, api_keys="k1,k2", max_body_bytes=2048)
    async with asgi_client(app) as client:
        body = {"collection": "gw", "query": "책"}
        assert (await client.post("/v1/search", json=body)).status_code == 401
        assert (await client.post("/v1/search", json=body, headers={"X-API-Key": "k2"})).status_code == 200
        bearer = {"Authorization": "Bearer k1"}  # what the official openai client sends
        assert (await client.post("/v1/search", json=body, headers=bearer)).status_code == 200
        big = {"collection": "gw", "query": "가" * 3000}
        r = await client.post("/v1/search", json=big, headers={"X-API-Key": "k1"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"

        async def chunks():  # no Content-Length: the limit still holds
            yield b'{"collection": "gw", "query": "'
            for _ in range(10):
                yield ("가" * 300).encode()
            yield b'"}'

        r = await client.post("/v1/search", content=chunks(), headers={"X-API-Key": "k1",
                                                                      "content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert (await client.post("/v1/search", json=body, headers={"X-API-Key": "k1"})).status_code == 200
        assert (await client.get("/healthz")).status_code == 200


async def test_collections_are_listed_and_deleted(http):
    assert (await http.post("/v1/collections", json={"name": "gone"})).status_code == 201
    listed = (await http.get("/v1/collections")).json()["collections"]
    names = [c["name"] for c in listed]
    assert {"gw", "gone"} <= set(names) and names == sorted(names)
    assert next(c for c in listed if c["name"] == "gw")["documents"] == 3
    r = await http.delete("/v1/collections/gone")
    assert r.status_code == 200 and r.json()["name"] == "gone" and r.json()["documents"] == 0, r.text
    assert (await http.get("/v1/collections/gone")).status_code == 404
    assert (await http.delete("/v1/collections/gone")).status_code == 404
    assert "gone" not in [c["name"] for c in (await http.get("/v1/collections")).json()["collections"]]


async def test_jobs_for_a_missing_collection_are_404_at_submit_not_a_failed_job(http):
    for path, body in (("/v1/collections/nowhere/documents", {"documents": GATEWAY_DOCS}),
                       ("/v1/collections/nowhere/reindex", None)):
        r = await http.post(path, json=body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text


async def test_a_duplicate_id_is_named_with_both_places(http):
    docs = [{"id": "x", "text": "가"}, {"id": "y", "text": "나"}, {"id": "x", "text": "다"}]
    r = await http.post("/v1/collections/gw/documents", json={"documents": docs})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["fields"][0]["field"] == "documents"
    assert "'x'" in error["fields"][0]["description"] and "documents[0]" in error["fields"][0]["description"]
    assert "documents[2]" in error["fields"][0]["description"]


SHORT_DOCS = json.dumps({"documents": [{"id": f"short-{i}", "text": f"{i}번 상품: 선물용 제주 감귤 한 상자"}
                                       for i in range(10_000)]}).encode()  # made here, not on the loop


async def test_the_body_limit_admits_the_schemas_maximum_of_short_documents(http):
    r = await http.post("/v1/collections/gw/documents", content=SHORT_DOCS,
                        headers={"content-type": "application/json"})
    assert r.status_code == 202, r.text[:300]  # 10,000 documents (the schema's maximum) fit the ingest body limit
    cancelled = (await http.post(f"/v1/jobs/{r.json()['id']}:cancel")).json()  # not needed for the test: stop it
    assert cancelled["id"] == r.json()["id"]
    done = await job_finished(http, f"/v1/jobs/{r.json()['id']}")
    assert done["state"] == "failed" and any("cancelled" in e for e in done["errors"]), done


async def test_a_blank_query_names_the_query_field(http):
    r = await http.post("/v1/search", json={"collection": "gw", "query": "   "})
    assert r.status_code == 400, r.text
    assert [f["field"] for f in r.json()["error"]["fields"]] == ["query"]


async def test_the_openai_client_retrieves_one_model(http):

    client = AsyncOpenAI(api_key="unused", base_url="http://gw/v1", http_client=http)
    model = await client.models.retrieve("intfloat/multilingual-e5-small")
    assert model.id == "intfloat/multilingual-e5-small" and model.owned_by == "korean-inference-mesh"
    assert (await client.models.retrieve("intfloat/multilingual-e5-small:query")).id.endswith(":query")
    with pytest.raises(NotFoundError):
        await client.models.retrieve("gpt-4o")
