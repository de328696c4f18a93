"""The REST contract: the committed snapshot is the served spec, and no released operation changed."""

import copy

import httpx

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.contract import SNAPSHOT, canonical, changed_operations, released


def current() -> dict:
    return create_app(GatewaySettings()).openapi()


async def test_the_committed_snapshot_is_the_spec_the_gateway_serves_byte_for_byte():
    app = create_app(GatewaySettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        served = (await client.get("/openapi.json")).json()
    assert canonical(served) == SNAPSHOT.read_text(), "run `make openapi` and commit gateway/openapi.json"


def test_no_released_operation_changed():
    assert changed_operations(released(), current()) == []


def test_rule_catches_changes_and_allows_additions():
    spec = current()
    grown = copy.deepcopy(spec)
    grown["paths"]["/v1/new"] = {"get": {"responses": {}}}
    assert changed_operations(spec, grown) == []
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["SearchRequest"]["properties"]["top_k"]["maximum"] = 1000
    assert "schema changed: SearchRequest" in changed_operations(spec, changed)
    optional = copy.deepcopy(spec)
    optional["components"]["schemas"]["SearchRequest"]["properties"]["extra"] = {"type": "string"}
    assert changed_operations(spec, optional) == []
    streamed = copy.deepcopy(spec)  # event schemas added to a stream released as text: documentation, allowed
    sse = streamed["paths"]["/v1/chat"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    without = copy.deepcopy(spec)
    del without["paths"]["/v1/chat"]["post"]["responses"]["200"]["content"]["text/event-stream"]["x-itemSchema"]
    assert changed_operations(without, streamed) == []
    sse["x-itemSchema"]["oneOf"].pop()  # once released, changing them is a change
    assert "changed: POST /v1/chat" in changed_operations(spec, streamed)
    required = copy.deepcopy(optional)
    required["components"]["schemas"]["SearchRequest"].setdefault("required", []).append("extra")
    assert "schema changed: SearchRequest" in changed_operations(spec, required)
    relaxed = copy.deepcopy(spec)  # a request field made optional and nullable: every old request still valid
    request = relaxed["components"]["schemas"]["SearchRequest"]
    request["required"] = [r for r in request["required"] if r != "collection"]
    name = request["properties"]["collection"]
    request["properties"]["collection"] = {
        "anyOf": [{k: v for k, v in name.items() if k not in ("title", "examples")}, {"type": "null"}],
        "title": name["title"], "description": "now optional"}
    assert changed_operations(spec, relaxed) == []
    widened = copy.deepcopy(spec)
    widened["components"]["schemas"]["SearchRequest"]["properties"]["collection"] = {
        "anyOf": [{"type": "string"}, {"type": "null"}]}  # the length bounds dropped: not just a widening to null
    assert "schema changed: SearchRequest" in changed_operations(spec, widened)
    answer = copy.deepcopy(spec)  # a response field made optional breaks its readers
    response = answer["components"]["schemas"]["SearchResponse"]
    response["required"] = [r for r in response["required"] if r != "degraded"]
    assert "schema changed: SearchResponse" in changed_operations(spec, answer)
    gone = copy.deepcopy(spec)
    del gone["components"]["schemas"]["SearchRequest"]["properties"]["top_k"]
    assert "schema changed: SearchRequest" in changed_operations(spec, gone)
    reworded = copy.deepcopy(spec)
    reworded["paths"]["/v1/search"]["post"]["description"] = "Better prose for the same operation."
    assert changed_operations(spec, reworded) == []  # prose breaks no client
    moved = copy.deepcopy(spec)
    moved["paths"]["/v1/search"]["post"]["operationId"] = "renamed"
    assert "changed: POST /v1/search" in changed_operations(spec, moved)
    removed = copy.deepcopy(spec)
    del removed["paths"]["/v1/search"]
    assert "removed: POST /v1/search" in changed_operations(spec, removed)


def test_every_operation_documents_its_errors():
    for path, ops in current()["paths"].items():
        for method, op in ops.items():
            if path.startswith("/v1/"):
                assert {"400", "404", "503", "504"} <= set(op["responses"]), (method, path)


def test_new_operations_do_not_document_the_422_the_gateway_never_sends():
    spec = current()
    snapshot = released()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            frozen = snapshot["paths"].get(path, {}).get(method)
            if frozen is None:
                assert "422" not in op["responses"], (method, path)
            else:
                assert ("422" in op["responses"]) == ("422" in frozen["responses"]), (method, path)
