"""Bad input that used to escape the error path (issue 17 defects 5, 11, 14): each answers the one error body.

Regression tests written to reproduce each defect first: a filter integer beyond int64 and a lone
surrogate used to end in a plain-text 500 outside the access log; ``gte: NaN`` was silently ignored
(unfiltered hits); an OCR job id with ``:`` reached Redis keys; 503s carried no Retry-After.
The fixtures ``retrieval_port`` and ``http`` (the gateway with collection "gw") are in tests/service/conftest.py.
"""

import httpx
import pytest

from support import free_port, job_finished
from support.apps import asgi_client, gateway_app
from support.servers import running_retrieval

pytestmark = pytest.mark.asyncio(loop_scope="session")


def shaped(r: httpx.Response) -> dict:
    """The standard error body (parsing fails on a plain-text 500)."""
    body = r.json()
    assert set(body) == {"error"} and {"code", "message", "retryable"} <= set(body["error"]), body
    return body["error"]


@pytest.mark.parametrize("condition, field", [
    ({"field": "price", "eq": 10**29}, "filter.must[0].eq"),
    ({"field": "price", "gte": float("nan")}, "filter.must[0].gte"),
    ({"field": "price", "lt": float("inf")}, "filter.must[0].lt"),
])
async def test_out_of_range_filter_values_are_400_naming_the_field(http, condition, field):
    import json

    body = json.dumps({"collection": "gw", "query": "책", "filter": {"must": [condition]}})  # NaN as JSON allows
    r = await http.post("/v1/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert [f["field"] for f in shaped(r)["fields"]] == [field]


@pytest.mark.parametrize("path, body, field", [
    ("/v1/embeddings", '{"model": "intfloat/multilingual-e5-small", "input": "\\ud800"}', "input"),
    ("/v1/embeddings", '{"model": "intfloat/multilingual-e5-small", "input": ["ok", "a\\udfffb"]}', "input"),
    ("/v1/search", '{"collection": "gw", "query": "\\ud800"}', "query"),
])
async def test_a_lone_surrogate_is_400_naming_the_field(http, path, body, field):
    r = await http.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert [f["field"] for f in shaped(r)["fields"]] == [field]


async def test_an_unexpected_error_is_the_error_body_with_the_request_id(retrieval_port):
    app = gateway_app(free_port(), retrieval_port)

    @app.get("/v1/broken-for-the-test")
    async def broken():
        raise RuntimeError("a bug")

    async with asgi_client(app) as client:
        r = await client.get("/v1/broken-for-the-test", headers={"X-Request-ID": "rid-bug"})
    assert r.status_code == 500 and r.headers["x-request-id"] == "rid-bug"
    error = shaped(r)
    assert error["code"] == "internal" and "rid-bug" in error["message"] and "a bug" not in error["message"]


@pytest.mark.parametrize("job_id, reaches_the_route", [("abc:pages", True), ("x" * 200, True), ("../../etc", False)])
async def test_ocr_job_ids_are_validated_before_any_call(http, job_id, reaches_the_route):
    r = await http.get(f"/v1/ocr/jobs/{job_id}")  # no OCR service runs here: only a refusal can answer
    assert r.status_code == 404, r.text
    error = shaped(r)
    assert error["code"] == "not_found"
    # an id the route sees is refused by its shape; ``..`` segments are resolved by the client to another path
    assert ("32 hexadecimal" in error["message"]) == reaches_the_route, error


async def test_unavailable_says_when_to_retry(retrieval_port):
    async with asgi_client(gateway_app(free_port(), retrieval_port)) as client:
        r = await client.post("/v1/search", json={"collection": "gw", "query": "책", "mode": "dense"})
    assert r.status_code == 503 and shaped(r)["retryable"]
    assert int(r.headers["retry-after"]) >= 1


@pytest.mark.slow
async def test_a_large_valid_result_is_returned_not_refused_as_overload(embedding_service, tmp_path):
    # Its own retrieval service, one point per document (`passage_chars=0`): what is checked is the size of
    # the answer, and embedding every passage of 1.8 M characters would take minutes on two cores.
    async with running_retrieval(tmp_path, embedding_service.port, passage_chars=0) as retrieval, \
            asgi_client(gateway_app(embedding_service.port, retrieval.port)) as http:
        assert (await http.post("/v1/collections", json={"name": "long"})).status_code == 201
        text = "긴 문서의 본문입니다 " * 1500  # 18,000 characters, ~44 KB of UTF-8 per document
        docs = [{"id": f"l{i}", "text": f"{i}번 {text}"} for i in range(100)]
        for start in range(0, len(docs), 15):  # the 2 MB body limit holds ~20 such documents (JSON-escaped)
            r = await http.post("/v1/collections/long/documents", json={"documents": docs[start:start + 15]})
            assert r.status_code == 202, r.text[:300]
            state = await job_finished(http, f"/v1/jobs/{r.json()['id']}", timeout_s=120)
            assert state["state"] == "succeeded", state
        r = await http.post("/v1/search", json={"collection": "long", "query": "긴 문서", "top_k": 100,
                                                "mode": "keyword"}, headers={"X-Request-Timeout-Ms": "20000"})
        assert r.status_code == 200, r.text[:500]
        assert len(r.json()["hits"]) == 100 and len(r.content) > 4 * 1024 * 1024  # beyond gRPC's default limit


def nested(depth: int) -> dict:
    """A payload nested ``depth`` levels deep."""
    out: dict = {"leaf": 1}
    for _ in range(depth - 1):
        out = {"n": out}
    return out


@pytest.mark.parametrize("payload, why", [
    ('{"n": 1' + "0" * 400 + "}", "a 401-digit integer"),
    ('{"n": NaN}', "NaN"),
    ('{"n": -Infinity}', "infinity"),
    ('{"\\ud800": 1}', "a lone surrogate as a key"),
    ('{"k": "\\udfff"}', "a lone surrogate as a value"),
    (__import__("json").dumps(nested(50)), "nesting 50 deep"),
])
async def test_an_unstorable_payload_is_refused_at_submit_naming_the_document(http, payload, why):
    body = ('{"documents": [{"id": "ok", "text": "멀쩡한 문서"}, {"id": "bad", "text": "문서", "payload": '
            + payload + "}]}")
    r = await http.post("/v1/collections/gw/documents", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, (why, r.text[:300])  # before: 202, then a job that never ended
    assert [f["field"] for f in shaped(r)["fields"]] == ["documents[1].payload"], why


async def test_too_many_fields_are_refused_before_any_index_is_built(http):
    fields = {f"f{i}": "keyword" for i in range(1000)}
    r = await http.post("/v1/collections", json={"name": "wide", "fields": fields})
    assert r.status_code == 400 and [f["field"] for f in shaped(r)["fields"]] == ["fields"]
