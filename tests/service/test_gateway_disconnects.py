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
import json

import httpx
import pytest
import pytest_asyncio
from prometheus_client import REGISTRY

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
FIRST_PIECE = '{"answerable": true, "answer": "비 오는 날 읽기 좋은'


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def catalog(embedding_service, retrieval_port):
    """Collection "storm" holding GATEWAY_DOCS; the (embedding, retrieval) ports."""
    async with asgi_client(gateway_app(embedding_service.port, retrieval_port)) as http:
        assert (await http.post("/v1/collections", json={"name": "storm"})).status_code == 201
        job = (await http.post("/v1/collections/storm/documents", json={"documents": GATEWAY_DOCS})).json()
        assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
    return embedding_service.port, retrieval_port


async def leave_mid_stream(base: str, i: int) -> str:
    """Open one streamed answer, read until its first piece of text (a grounded answer: its passages, sent
    before the LLM's first token), then drop the connection."""
    if i % 2:
        path, body = "/v1/chat/completions", {"model": "local", "stream": True,
                                              "messages": [{"role": "user", "content": f"안녕 {i}"}]}
    else:
        path, body = "/v1/answers:stream", {"collection": "storm", "question": f"비 오는 날 읽을 소설 {i}",
                                            "min_score": 0}
    limits = httpx.Limits(max_keepalive_connections=0)  # closing the response closes the socket
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as http:
        async with http.stream("POST", path, json=body) as r:
            assert r.status_code == 200, await r.aread()
            event = ""
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and (event == "passages" or _content(line)):
                    return line  # an answer is shown only once whole and checked: its client leaves while it is written
    raise AssertionError(f"{path}: the stream ended before any text")


def _content(line: str) -> str:
    """The text of a chat-completion chunk (``data: {...}``), '' for any other line."""
    try:
        chunk = json.loads(line.removeprefix("data:"))
    except ValueError:
        return ""
    return "".join(c.get("delta", {}).get("content") or "" for c in chunk.get("choices", []))


def in_flight() -> dict[str, float]:
    """The gauge per (route, instance)."""
    return {f"{s.labels['route']}/{s.labels['target']}": s.value
            for metric in REGISTRY.collect() if metric.name == "mesh_gateway_reasoning_in_flight"
            for s in metric.samples}


async def test_two_hundred_clients_leaving_mid_stream_give_every_ring_slot_back(catalog):
    stall = {"chunks": [FIRST_PIECE, " 장편소설입니다.\"", ', "citations": [1]}'], "first_delay_s": 0.5,
             "stall_after": 1}
    quick = {"chunks": ["네, ", "답합니다."]}
    standin = ChatStandIn([stall])
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            target = f"127.0.0.1:{svc.port}"
            app = gateway_app(catalog[0], catalog[1], reasoning_targets=target, default_timeout_ms=30000)
            async with serving(app) as base:
                ring = app.state.mesh.routes.get("local").pool.ring
                gate = asyncio.Semaphore(CONCURRENCY)

                async def one(i: int) -> str:
                    async with gate:
                        return await leave_mid_stream(base, i)

                firsts = await asyncio.gather(*(one(i) for i in range(STORM)))
                assert len(firsts) == STORM
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
