"""Tenant isolation, generated from the served OpenAPI document (issue 76).

Two teams share one gateway, each with a scoped key (collections ``a-*`` and ``b-*``). Team A creates one
resource of every kind through REST — a collection and its ingest job, an OCR job and a masking job
(their owner records; the OCR service is not run here), a conversation with a confirmed profile and
its list job, an interview, an assistant session. Then, for every route and method of the served
spec, key B is sent against A's resources (A's ids in the path, A's collection in the body): every
answer is a 404 or a 403, never A's data. A route of the spec with no access decision
(gateway/access/routes.py) fails the test until it has one; a stateless route is listed as such there.
Key A reads the same GET routes with 200, so the refusals are ownership, not a broken route.

Over real embedding and retrieval services and a real reasoning service whose LLM is the OpenAI-compatible
stand-in (bench/standin.py: the smallest valid JSON for a schema), so creating the resources costs no model.
"""

from __future__ import annotations

import asyncio
import os
import re
import time

import httpx
import pytest
import pytest_asyncio

from bench.standin import ChatStandIn, minimal_instance, schema_or
from gateway.access.context import acting_as
from gateway.access.routes import ROUTES
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.catalogs import GIFT_ATTRIBUTES, GIFT_CATALOG, GIFT_CATEGORIES
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
A, B, S = "alpha-team-key-0001", "beta-team-key-0002", "search-only-key-0003"
KEYS = f"""keys:
  - key: {A}
    id: team-a
    collections: {{read: ["a-*"], write: ["a-*"]}}
  - key: {B}
    id: team-b
    collections: {{read: ["b-*"], write: ["b-*"]}}
  - key: {S}
    id: team-s
    groups: [search]
    models: []
"""
STATELESS = {"none", "self"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def shared(embedding_service, retrieval_port, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tenants")
    keys = folder / "keys.yaml"
    keys.write_text(KEYS, encoding="utf-8")
    standin = ChatStandIn(schema_or("네"))
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{svc.port}",
                              api_keys_file=str(keys), ocr_target="127.0.0.1:1")
            async with asgi_client(app) as http:
                yield app, http, await resources_of_a(app, http)
    finally:
        standin.close()


async def resources_of_a(app, http) -> dict[str, str]:
    """One resource of every kind, created by key A; their ids by path parameter kind."""
    a = {"X-API-Key": A}
    r = await http.post("/v1/collections", json={"name": "a-gifts", "fields": GIFT_CATALOG["fields"]}, headers=a)
    assert r.status_code == 201, r.text
    job = (await http.post("/v1/collections/a-gifts/documents", json={"documents": GIFT_CATALOG["items"][:8]},
                           headers=a))
    assert job.status_code == 202, job.text
    job = job.json()
    for _ in range(300):
        if (await http.get(f"/v1/jobs/{job['id']}", headers=a)).json()["state"] in ("succeeded", "failed"):
            break
        await asyncio.sleep(0.1)
    conversation = (await http.post("/v1/conversations", json={
        "collection": "a-gifts", "categories": GIFT_CATEGORIES, "attributes": GIFT_ATTRIBUTES}, headers=a)).json()
    cid = conversation["id"]
    turn = await http.post(f"/v1/conversations/{cid}/turns", json={"text": "아내 생일 선물 찾는데요"}, headers=a)
    assert turn.status_code == 200, turn.text
    confirmed = await http.post(f"/v1/conversations/{cid}:confirm", json={}, headers=a)
    assert confirmed.status_code == 200, confirmed.text
    lists = await http.post(f"/v1/conversations/{cid}/lists", json={}, headers=a)
    assert lists.status_code == 202, lists.text
    interview = await http.post("/v1/interviews", json={"resume": "백엔드 개발자 3년, 결제 시스템을 만들었습니다.",
                                                        "posting": "핀테크 백엔드 개발자 채용", "questions": 2},
                                headers=a)
    assert interview.status_code in (200, 201), interview.text
    session = await http.post("/v1/assistant/sessions", json={"collections": ["a-gifts"], "caller": "1"}, headers=a)
    assert session.status_code == 201, session.text
    ocr = app.state.mesh.ocr
    with acting_as(app.state.mesh.keys.by_id("team-a")):  # as POST /v1/ocr/jobs records it
        await ocr._record("a" * 32)
        await ocr._record("b" * 32)
    return {"job": job["id"], "conversation_id": cid, "list_job": lists.json()["id"],
            "interview_id": interview.json()["id"], "session_id": session.json()["id"], "name": "a-gifts",
            "ocr_job": "a" * 32, "masking_job": "b" * 32}


def _resolve(spec: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(spec, schema["allOf"][0])
    if "anyOf" in schema:
        return _resolve(spec, next(s for s in schema["anyOf"] if s.get("type") != "null"))
    if "properties" in schema:
        schema = {**schema, "properties": {k: _resolve(spec, v) for k, v in schema["properties"].items()}}
    if "items" in schema:
        schema = {**schema, "items": _resolve(spec, schema["items"])}
    return schema


def body_for(spec: dict, operation: dict) -> dict | None:
    """The smallest valid body of an operation, aimed at A's collection where it names one."""
    content = (operation.get("requestBody") or {}).get("content", {})
    if "application/json" not in content:
        return None
    body = minimal_instance(_resolve(spec, content["application/json"]["schema"]))
    if isinstance(body, dict):
        props = _resolve(spec, content["application/json"]["schema"]).get("properties", {})
        if "collection" in props:
            body["collection"] = "a-gifts"
        if "collections" in props:
            body["collections"] = ["a-gifts"]
        if operation.get("operationId", "").startswith("create_collection"):
            body["name"] = "a-gifts"  # B creating (over) A's collection
        for field in ("query", "question", "text", "answer"):
            if field in body:
                body[field] = "선물 추천"
    return body


def path_for(template: str, owns: str, ids: dict[str, str]) -> str:
    kind = owns.split(":", 1)[1] if ":" in owns else ""

    def value(match: re.Match) -> str:
        param = match.group(1)
        if param == "job_id":
            return {"ocr_job": ids["ocr_job"], "masking_job": ids["masking_job"]}.get(
                kind, ids["list_job"] if "conversations" in template else ids["job"])
        return {"index": "0", "model_id": "local", "name": ids["name"]}.get(param, ids.get(param, "x"))

    return re.sub(r"\{(\w+)\}", value, template)


async def test_every_route_of_the_spec_has_an_access_decision_and_key_b_never_reaches_as_resources(shared):
    app, http, ids = shared
    spec = app.openapi()
    undecided = [(m.upper(), p) for p, ops in spec["paths"].items() if p.startswith("/v1/")
                 for m in ops if (m.upper(), p) not in ROUTES]
    assert not undecided, f"routes with no access decision in gateway/access/routes.py: {undecided}"
    crossed, checked = [], 0
    for template, ops in spec["paths"].items():
        if not template.startswith("/v1/"):
            continue
        for method, operation in ops.items():
            access = ROUTES[(method.upper(), template)]
            if access.owns in STATELESS:
                continue
            url = path_for(template, access.owns, ids)
            body = body_for(spec, operation)
            if access.owns.startswith("create:") and not (isinstance(body, dict) and {"collection", "collections"}
                                                          & set(body)):
                continue  # a key creating its own resource (nothing of A's named)
            if (method, template) == ("get", "/v1/collections"):  # a list: answered, without A's collections
                r = await http.get(url, headers={"X-API-Key": B})
                assert r.status_code == 200 and "a-gifts" not in r.text, r.text
                checked += 1
                continue
            if template.endswith("/files"):
                r = await http.post(url, content=b"x", headers={"X-API-Key": B, "Content-Type": "text/plain"})
            else:
                r = await http.request(method.upper(), url, json=body, headers={"X-API-Key": B})
            checked += 1
            if r.status_code not in (403, 404):
                crossed.append(f"{method.upper()} {template} {r.status_code} {r.text[:300]}")
            elif r.status_code == 404:
                assert "a-gifts" not in r.text or "does not exist" in r.text, r.text  # nothing of A's shown
    assert not crossed, "\n".join(crossed)
    owned = sum(1 for a in ROUTES.values() if a.owns.startswith(("read:", "collection:")))
    assert checked == owned + 2, checked  # and the two creations that name a collection (conversation, session)
    # The refusals are ownership: key A reads the same GET routes.
    for template, ops in spec["paths"].items():
        access = ROUTES.get(("GET", template))
        if "get" not in ops or access is None or access.owns in STATELESS or "{" not in template:
            continue
        if access.owns in ("read:ocr_job", "read:masking_job"):
            continue  # the OCR service is not run here: A's poll passes the owner check, then finds it down
        r = await http.get(path_for(template, access.owns, ids), headers={"X-API-Key": A})
        assert r.status_code == 200, (template, r.text)
    poll = await http.get(f"/v1/ocr/jobs/{ids['ocr_job']}", headers={"X-API-Key": A})
    assert poll.status_code in (502, 503, 504), poll.text  # past the owner check, to the (absent) OCR service


async def test_collections_a_key_may_not_read_are_not_listed_and_groups_and_models_limit_routes(shared):
    _app, http, _ids = shared
    mine = (await http.get("/v1/collections", headers={"X-API-Key": A})).json()["collections"]
    theirs = (await http.get("/v1/collections", headers={"X-API-Key": B})).json()["collections"]
    assert "a-gifts" in [c["name"] for c in mine] and all(c["name"].startswith("b-") for c in theirs)
    r = await http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "안녕"}]},
                        headers={"X-API-Key": S})
    assert r.status_code == 403  # a search-only key: no LLM route
    assert (await http.get("/v1/models", headers={"X-API-Key": S})).json()["data"] == [] or all(
        not m["id"].startswith("local") for m in (await http.get("/v1/models", headers={"X-API-Key": S})).json()[
            "data"])
    search = await http.post("/v1/search", json={"collection": "a-gifts", "query": "선물"}, headers={"X-API-Key": S})
    assert search.status_code == 200  # its groups allow search; its collections are not limited
    write = await http.post("/v1/collections/a-gifts/documents:delete", json={"ids": ["x"]},
                            headers={"X-API-Key": B})
    assert write.status_code == 404 and "does not exist" in write.json()["error"]["message"]


async def test_the_keys_file_is_reloaded_on_change(shared):
    app, http, _ids = shared
    path = app.state.mesh.keys.file
    before = path.read_text(encoding="utf-8")
    try:
        path.write_text(before.replace('read: ["b-*"]', 'read: ["b-*", "a-gifts"]'), encoding="utf-8")
        os.utime(path, (time.time() + 5, time.time() + 5))
        await asyncio.sleep(1.05)
        r = await http.post("/v1/search", json={"collection": "a-gifts", "query": "선물"}, headers={"X-API-Key": B})
        assert r.status_code == 200, r.text
    finally:
        path.write_text(before, encoding="utf-8")
        os.utime(path, (time.time() + 10, time.time() + 10))
        await asyncio.sleep(1.05)
    r = await http.post("/v1/search", json={"collection": "a-gifts", "query": "선물"}, headers={"X-API-Key": B})
    assert r.status_code == 404


async def test_a_gateway_with_scoped_keys_builds_its_own_mesh_at_start(embedding_service, retrieval_port, tmp_path):
    """The lifespan (the mesh built from settings, routes warmed) is the gateway's own work, not a request's.

    A server sends the lifespan through every middleware, the API-key one included: a keys file whose
    keys may use no model route stopped the gateway starting ('local' is not a model route) until the
    middleware left non-HTTP scopes alone. Run here as uvicorn runs it, through the whole app.
    """
    from gateway.app import create_app
    from gateway.config import GatewaySettings
    from services.runtime.loopguard import starting
    from support.apps import target

    keys = tmp_path / "keys.yaml"
    keys.write_text(KEYS, encoding="utf-8")
    settings = GatewaySettings(embedding_target=target(embedding_service.port), retrieval_target=target(retrieval_port),
                               api_keys_file=str(keys))
    with starting():
        app = create_app(settings)
    inbox: asyncio.Queue = asyncio.Queue()
    sent: list[dict] = []
    await inbox.put({"type": "lifespan.startup"})

    async def send(message: dict) -> None:
        sent.append(message)

    with starting():
        task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, send))
        for _ in range(600):
            if sent:
                break
            await asyncio.sleep(0.05)
    assert sent and sent[0]["type"] == "lifespan.startup.complete", sent
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            r = await http.get("/v1/models", headers={"X-API-Key": A})
            assert r.status_code == 200 and any(m["id"] == "local" for m in r.json()["data"])
            others = (await http.get("/v1/models", headers={"X-API-Key": S})).json()["data"]
            assert all(m["id"] != "local" for m in others)  # its models: [] — no model route listed
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 30)
