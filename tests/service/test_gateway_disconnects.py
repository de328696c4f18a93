"""Clients that leave mid-stream: every ring slot comes back, and the gateway keeps answering.

The gateway runs under uvicorn on a real port (a disconnect is a closed TCP connection, as in
production), over the real embedding, retrieval and reasoning services; the LLM behind the reasoning
service is the scripted stand-in (bench/standin.py), which sends the first piece of each answer and then
stalls, so every client below leaves while its answer is being written. What is checked is the
gateway's own bookkeeping: the ring's in-flight count per instance (the `mesh_gateway_reasoning_in_flight`
gauge) back to 0, and the requests after the storm served.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import pytest_asyncio
from prometheus_client import REGISTRY

from bench.faults_scenarios import STALLED_ANSWER, leave_mid_stream
from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support import eventually_async, job_finished
from support.apps import asgi_client, gateway_app, serving
from support.catalogs import GATEWAY_DOCS
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
STORM = 200  # clients that leave mid-stream: half on /v1/answers:stream, half on /v1/chat/completions
AFTER = 100  # requests that must succeed afterwards
CONCURRENCY = 10


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def catalog(embedding_service, retrieval_port):
    """Collection "storm" holding GATEWAY_DOCS; the (embedding, retrieval) ports."""
    async with asgi_client(gateway_app(embedding_service.port, retrieval_port)) as http:
        assert (await http.post("/v1/collections", json={"name": "storm"})).status_code == 201
        job = (await http.post("/v1/collections/storm/documents", json={"documents": GATEWAY_DOCS})).json()
        assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
    return embedding_service.port, retrieval_port


def in_flight() -> dict[str, float]:
    """The gauge per (route, instance)."""
    return {f"{s.labels['route']}/{s.labels['target']}": s.value
            for metric in REGISTRY.collect() if metric.name == "mesh_gateway_reasoning_in_flight"
            for s in metric.samples}


async def test_two_hundred_clients_leaving_mid_stream_give_every_ring_slot_back(catalog):
    stall = STALLED_ANSWER  # the first piece of an answer, then nothing for 30 s
    quick = {"chunks": ["네, ", "답합니다."]}
    standin = ChatStandIn([stall])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            target = f"127.0.0.1:{svc.port}"
            app = gateway_app(catalog[0], catalog[1], reasoning_targets=target, default_timeout_ms=30000)
            async with serving(app) as base:
                ring = app.state.mesh.routes.get("local").pool.ring
                gate = asyncio.Semaphore(CONCURRENCY)

                async def one(i: int) -> str:  # the fault suite's client (bench/faults_scenarios.py), in a thread
                    async with gate:
                        return await asyncio.to_thread(leave_mid_stream, base, i, "storm", f"비 오는 날 읽을 소설 {i}")

                seen = await asyncio.gather(*(one(i) for i in range(STORM)))
                assert sorted(set(seen)) == ["content", "passages"], seen  # every client left mid-stream
                await eventually_async(lambda: ring.load[target], lambda n: n == 0, timeout_s=15,
                                       what="every ring slot given back")
                assert in_flight()[f"local/{target}"] == 0

                standin.script[:] = [quick]  # from now on the LLM answers at once
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    async def ask(i: int) -> int:
                        async with gate:
                            r = await http.post("/v1/chat/completions", json={
                                "model": "local", "messages": [{"role": "user", "content": f"질문 {i}"}]})
                            return r.status_code

                    statuses = await asyncio.gather(*(ask(i) for i in range(AFTER)))
                assert statuses == [200] * AFTER
                assert ring.load[target] == 0
    finally:
        standin.close()


async def test_a_non_streamed_completion_stops_when_its_client_leaves(catalog):
    """The client of a plain (JSON) chat completion times out and closes its connection: the slot comes back."""
    standin = ChatStandIn([STALLED_ANSWER])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            target = f"127.0.0.1:{svc.port}"
            app = gateway_app(catalog[0], catalog[1], reasoning_targets=target, default_timeout_ms=30000)
            async with serving(app) as base:
                ring = app.state.mesh.routes.get("local").pool.ring
                async with httpx.AsyncClient(base_url=base, timeout=1.0) as http:
                    with pytest.raises(httpx.ReadTimeout):
                        await http.post("/v1/chat/completions", json={
                            "model": "local", "messages": [{"role": "user", "content": "안녕하세요"}]})
                assert len(standin.requests) == 1
                # The stand-in stalls for 30 s: only the client's leaving can end the call this soon.
                await eventually_async(lambda: ring.load[target], lambda n: n == 0, timeout_s=5,
                                       what="the slot of a completion whose client left")
    finally:
        standin.close()
