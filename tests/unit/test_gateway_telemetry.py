"""The gateway's per-request telemetry: bounded route labels, request ids, one access line per request."""

import logging

import pytest
from prometheus_client import REGISTRY

from support import free_port
from support.apps import asgi_client, gateway_app

pytestmark = pytest.mark.asyncio(loop_scope="session")


def counts() -> dict[tuple[str, str], float]:
    """Requests counted so far by (route, status)."""
    return {(s.labels["route"], s.labels["status"]): s.value for m in REGISTRY.collect()
            if m.name == "mesh_gateway_request_seconds" for s in m.samples if s.name.endswith("_count")}


async def test_route_label_is_the_template_and_unknown_paths_share_one_label(caplog):
    dead = f"127.0.0.1:{free_port()}"  # nothing listens: calls fail fast, which is all these requests need
    app = gateway_app(dead, dead, ocr_target=dead, reasoning_targets=dead, admin_timeout_ms=500)
    caplog.set_level(logging.INFO, logger="gateway.access")
    before = counts()
    async with asgi_client(app) as http:
        for i in range(5):
            assert (await http.get(f"/no/such/path/{i}")).status_code == 404
            r = await http.get(f"/v1/collections/shop{i}", headers={"X-Request-ID": f"rid-{i}"})
            assert r.status_code == 503 and r.headers["x-request-id"] == f"rid-{i}"
        bad = await http.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
        assert bad.headers["x-request-id"] != "bad id with spaces" and len(bad.headers["x-request-id"]) == 32
    after = counts()
    grew = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    assert grew == {("unmatched", "404"): 5, ("/v1/collections/{name}", "503"): 5, ("/healthz", "200"): 1}, grew
    lines = [r for r in caplog.records if r.name == "gateway.access"]
    assert {getattr(r, "route", None) for r in lines} >= {"unmatched", "/v1/collections/{name}"}
    failed = [r for r in lines if getattr(r, "status", 0) == 503]
    assert len(failed) == 5 and all(r.levelno == logging.ERROR and r.route == "/v1/collections/{name}"
                                     for r in failed)


async def test_a_request_refused_before_routing_is_still_labelled_by_its_template():
    dead = f"127.0.0.1:{free_port()}"
    app = gateway_app(dead, dead, ocr_target=dead, reasoning_targets=dead, api_keys="k1")
    before = counts()
    async with asgi_client(app) as http:
        assert (await http.get("/v1/collections/secret-name")).status_code == 401
    after = counts()
    assert after[("/v1/collections/{name}", "401")] - before.get(("/v1/collections/{name}", "401"), 0) == 1
