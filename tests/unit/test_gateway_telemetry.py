"""The gateway's per-request telemetry: bounded route labels, request ids, one access line per request."""

import logging

import httpx
import pytest
from prometheus_client import REGISTRY

from gateway.app import create_app
from gateway.config import GatewaySettings
from tests.conftest import free_port

pytestmark = pytest.mark.asyncio(loop_scope="session")


def routes_seen() -> set[str]:
    return {s.labels["route"] for m in REGISTRY.collect() if m.name == "mesh_gateway_request_seconds"
            for s in m.samples}


async def test_route_label_is_the_template_and_unknown_paths_share_one_label(caplog):
    dead = f"127.0.0.1:{free_port()}"  # nothing listens: calls fail fast, which is all these requests need
    app = create_app(GatewaySettings(embedding_target=dead, retrieval_target=dead, ocr_target=dead,
                                     reasoning_targets=dead, admin_timeout_ms=500))
    caplog.set_level(logging.INFO, logger="gateway.access")
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        for i in range(5):
            assert (await http.get(f"/no/such/path/{i}")).status_code == 404
            r = await http.get(f"/v1/collections/shop{i}", headers={"X-Request-ID": f"rid-{i}"})
            assert r.status_code == 503 and r.headers["x-request-id"] == f"rid-{i}"
        bad = await http.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
        assert bad.headers["x-request-id"] != "bad id with spaces" and len(bad.headers["x-request-id"]) == 32
    seen = routes_seen()
    assert "unmatched" in seen and "/v1/collections/{name}" in seen
    assert not [r for r in seen if "shop" in r or "/no/such" in r]
    lines = [r for r in caplog.records if r.name == "gateway.access"]
    assert {getattr(r, "route", None) for r in lines} >= {"unmatched", "/v1/collections/{name}"}
    failed = [r for r in lines if getattr(r, "status", 0) == 503]
    assert len(failed) == 5 and all(r.levelno == logging.ERROR and r.route == "/v1/collections/{name}"
                                     for r in failed)
