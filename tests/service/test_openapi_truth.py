"""OpenAPI truth: every status code the gateway answers is documented for the operation that answered it.

schemathesis generates requests from the gateway's own served spec (valid and invalid ones, a fixed
seed, a few per operation; operations with path parameters also with existing resources) and sends them
to the real gateway (uvicorn on port 0) wired to the real embedding and retrieval services and a real
Redis (cache and jobs); OCR and reasoning point at a closed port, so their operations answer as they do
when those services are down. Only observed ⊆ documented is asserted: 422 stays documented on the
frozen operations although the gateway answers 400 (the snapshot forbids removing it). The fixture
``retrieval_port`` is in tests/service/conftest.py.
"""

from __future__ import annotations

import asyncio

import httpx
import hypothesis
import hypothesis.errors
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given
from schemathesis.checks import response_schema_conformance
from schemathesis.core.failures import FailureGroup

from support import free_port, job_finished
from support.apps import gateway_app, serving

pytestmark = pytest.mark.asyncio(loop_scope="session")
SEED = 20240607
EXAMPLES = 5  # per operation, per generation mode, per set of path parameters
DOCS = [
    {"id": "t1", "text": "겨울에 읽기 좋은 따뜻한 에세이", "payload": {"category": "에세이"}},
    {"id": "t2", "text": "파이썬으로 배우는 데이터 분석 입문", "payload": {"category": "IT"}},
]
Observed = dict[str, dict[int, str]]  # "METHOD /path" -> status -> the first request that got it (curl)


def explore(base_url: str, path_values: dict[str, dict[str, str]] | None = None,
            body_values: dict[str, dict[str, str]] | None = None) -> tuple[Observed, Observed, Observed]:
    """Send schemathesis' cases for every operation of the served spec.

    (observed codes, undocumented ones, JSON bodies that break their documented schema).

    ``path_values`` maps an operation ("METHOD /path") to path parameters of resources that exist, and
    ``body_values`` to JSON body fields that name them (set in valid bodies); both are tried besides the
    generated values, which mostly name nothing, so would only ever see 404.
    """
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    observed: Observed = {}
    undocumented: Observed = {}
    nonconforming: Observed = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        label = f"{operation.method.upper()} {operation.path}"
        documented = set(operation.definition.raw["responses"])
        fixed = (path_values or {}).get(label)
        fields = (body_values or {}).get(label)
        variants = [(mode, None, None) for mode in schemathesis.GenerationMode]
        variants += [(mode, fixed, None) for mode in schemathesis.GenerationMode if fixed]
        variants += [(schemathesis.GenerationMode.POSITIVE, fixed, fields)] if fields else []
        for mode, params, known in variants:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=params)
            if known:
                strategy = strategy.map(lambda case, known=known: naming(case, known))

            try:
                send_cases(strategy, base_url, documented, observed.setdefault(label, {}),
                           undocumented.setdefault(label, {}), nonconforming.setdefault(label, {}))
            except hypothesis.errors.Unsatisfiable:
                assert mode is schemathesis.GenerationMode.NEGATIVE, label  # nothing there to make invalid
    undocumented = {label: codes for label, codes in undocumented.items() if codes}
    nonconforming = {label: codes for label, codes in nonconforming.items() if codes}
    return observed, undocumented, nonconforming


def send_cases(strategy, base_url: str, documented: set[str], observed: dict[int, str],
               undocumented: dict[int, str], nonconforming: dict[int, str]) -> None:
    """Send ``EXAMPLES`` cases drawn from ``strategy`` (fixed seed); record each status and its first request.

    A JSON body that breaks the schema its status code documents is recorded in ``nonconforming``.
    """

    @hypothesis.seed(SEED)
    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
                         suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def send(case) -> None:
        response = case.call(base_url=base_url, timeout=30)
        status = response.status_code
        example = case.as_curl_command()
        observed.setdefault(status, example)
        if str(status) not in documented and "default" not in documented:
            undocumented.setdefault(status, example)
        elif str(response.headers.get("content-type", "")).find("application/json") >= 0:
            try:  # the body follows the schema documented for its status code
                case.validate_response(response, checks=[response_schema_conformance])
            except FailureGroup as failed:
                nonconforming.setdefault(status, f"{example}\n  {str(failed)[:600]}")

    send()


def naming(case, fields: dict[str, str]):
    """``case`` with ``fields`` set in its JSON body (a valid body stays valid: the values are real names)."""
    if isinstance(case.body, dict):
        case.body.update(fields)
    return case


async def seed_resources(base_url: str) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Two collections (one to delete), an ingest job, the model id: path values and body fields naming them."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        for name in ("truth", "doomed"):
            r = await http.post("/v1/collections", json={"name": name, "fields": {"category": "keyword"}})
            assert r.status_code == 201, r.text
        submitted = await http.post("/v1/collections/truth/documents", json={"documents": DOCS})
        assert submitted.status_code == 202, submitted.text
        job = await job_finished(http, f"/v1/jobs/{submitted.json()['id']}")
        assert job["state"] == "succeeded", job
        model = (await http.get("/v1/models")).json()["data"][0]["id"]
    named = {"name": "truth"}
    return {
        "GET /v1/collections/{name}": named, "POST /v1/collections/{name}/documents": named,
        "POST /v1/collections/{name}/documents:delete": named, "POST /v1/collections/{name}/reindex": named,
        "DELETE /v1/collections/{name}": {"name": "doomed"},
        "GET /v1/jobs/{job_id}": {"job_id": job["id"]}, "POST /v1/jobs/{job_id}:cancel": {"job_id": job["id"]},
        "GET /v1/models/{model_id}": {"model_id": model},
    }, {
        "POST /v1/search": {"collection": "truth"}, "POST /v1/recommendations": {"collection": "truth"},
        "POST /v1/recommendations:stream": {"collection": "truth"}, "POST /v1/embeddings": {"model": model},
    }


async def test_every_observed_status_code_is_documented(embedding_service, retrieval_port, redis_url):
    closed = f"127.0.0.1:{free_port()}"
    # Redis for the cache and the jobs, as the gateway chooses when a Redis is configured
    app = gateway_app(embedding_service.port, retrieval_port, ocr_target=closed, reasoning_targets=closed,
                      redis_url=redis_url)
    async with serving(app) as base_url:
        path_values, body_values = await seed_resources(base_url)
        observed, undocumented, nonconforming = await asyncio.to_thread(explore, base_url, path_values, body_values)
    operations = {f"{method.upper()} {path}" for path, ops in app.openapi()["paths"].items() for method in ops}
    assert set(observed) == operations  # every operation was exercised
    assert {200, 400, 404} <= set().union(*observed.values()), observed  # both happy and refused paths ran
    assert undocumented == {}, "\n".join(f"{op}: {status} undocumented, e.g. {example}"
                                         for op, codes in undocumented.items() for status, example in codes.items())
    assert nonconforming == {}, "\n".join(f"{op}: {status} body breaks its schema, e.g. {example}"
                                           for op, codes in nonconforming.items() for status, example in codes.items())


async def test_an_undocumented_status_code_and_a_body_off_its_schema_are_reported():
    from fastapi import HTTPException
    from fastapi.responses import JSONResponse

    app = FastAPI()

    @app.get("/teapot/{kind}", responses={404: {"description": "no such kind"}})
    async def teapot(kind: str) -> dict[str, str]:
        raise HTTPException(418 if kind == "tea" else 404)

    named = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}

    @app.get("/pot", response_model=None,
             responses={200: {"description": "a pot", "content": {"application/json": {"schema": named}}}})
    async def pot() -> JSONResponse:
        return JSONResponse({"name": 5})  # not the string the spec says

    async with serving(app) as base_url:
        observed, undocumented, nonconforming = await asyncio.to_thread(
            explore, base_url, {"GET /teapot/{kind}": {"kind": "tea"}})
    assert set(observed["GET /teapot/{kind}"]) >= {404, 418}
    assert set(undocumented) == {"GET /teapot/{kind}"} and set(undocumented["GET /teapot/{kind}"]) == {418}
    assert set(nonconforming) == {"GET /pot"} and set(nonconforming["GET /pot"]) == {200}
