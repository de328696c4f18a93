"""Fixtures the gateway tests of this folder share: a retrieval service over the session's embedding
service, and the gateway over both with the "gw" catalog in it. They are built from tests/support."""

import pytest_asyncio

from support import job_finished
from support.apps import asgi_client, gateway_app
from support.catalogs import GATEWAY_DOCS
from support.servers import running_retrieval


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def retrieval_port(embedding_service, tmp_path_factory):
    """A retrieval service (Qdrant in a fresh folder) over the session's embedding service; its port."""
    async with running_retrieval(tmp_path_factory.mktemp("gw-q"), embedding_service.port) as svc:
        yield svc.port


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def http(embedding_service, retrieval_port):
    """An httpx client of the gateway (ASGI) over both, with collection "gw" holding GATEWAY_DOCS."""
    async with asgi_client(gateway_app(embedding_service.port, retrieval_port)) as client:
        r = await client.post("/v1/collections", json={"name": "gw", "fields": {"category": "keyword",
                                                                               "price": "integer"}})
        assert r.status_code == 201, r.text
        job = (await client.post("/v1/collections/gw/documents", json={"documents": GATEWAY_DOCS})).json()
        state = await job_finished(client, f"/v1/jobs/{job['id']}")
        assert state["state"] == "succeeded" and state["done"] == 3, state
        yield client
