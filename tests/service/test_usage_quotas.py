"""What each caller spends: usage per key, route and model, and quotas that answer 429 (issue 65).

Over a real reasoning service whose LLM is the OpenAI-compatible stand-in (bench/standin.py): each
answer is a few fixed chunks, so the tokens a response reports are known and what is checked is the
gateway's accounting — the usage counters equal the responses' ``usage``, a key sees only its own,
a quota refuses before the LLM is called, a file edit changes the quota without a restart, and 16
concurrent callers do not overshoot a quota by more than one request — in one process, and across
two gateway instances on one real Redis (the Lua script).
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import pytest_asyncio

from bench.standin import ChatStandIn
from gateway.http.auth import key_id
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
A, B, C = "key-alpha-123", "key-beta-456", "key-gamma-789"
CHAT = {"model": "local", "messages": [{"role": "user", "content": "안녕하세요"}], "max_tokens": 16}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def reasoning():
    standin = ChatStandIn(lambda body: {"chunks": ["안녕", "하세요"]})
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True) as svc:
            yield svc
    finally:
        standin.close()


def quotas_file(tmp_path, text: str):
    path = tmp_path / "quotas.yaml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_usage_is_the_sum_of_the_responses_and_a_key_sees_its_own(reasoning, embedding_service,
                                                                        retrieval_port):
    app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}",
                      api_keys=f"{A},{B}")
    async with asgi_client(app) as http:
        said = {A: [0, 0], B: [0, 0]}
        for key, n in ((A, 3), (B, 2)):
            for _ in range(n):
                r = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": key})
                assert r.status_code == 200, r.text
                said[key][0] += r.json()["usage"]["prompt_tokens"]
                said[key][1] += r.json()["usage"]["completion_tokens"]
        mine = (await http.get("/v1/usage", params={"group_by": "key"}, headers={"X-API-Key": A})).json()
        assert mine["key"] == key_id(A) and [r["group"] for r in mine["rows"]] == [key_id(A)]
        row = mine["rows"][0]
        assert (row["requests"], row["prompt_tokens"], row["completion_tokens"]) == (3, *said[A])
        by_route = (await http.get("/v1/usage", params={"group_by": "route"}, headers={"X-API-Key": B})).json()
        assert by_route["rows"][0]["group"] == "/v1/chat/completions"
        assert by_route["total"]["prompt_tokens"] == said[B][0] and by_route["total"]["requests"] == 2
        bad = await http.get("/v1/usage", params={"from": "yesterday"}, headers={"X-API-Key": A})
        assert bad.status_code == 400 and bad.json()["error"]["fields"][0]["field"] == "from"
        metrics = (await http.get("/metrics")).text
        assert f'mesh_gateway_llm_tokens_total{{key="{key_id(A)}",model=' in metrics
        assert A not in metrics and B not in metrics  # ids, never the keys


async def test_a_quota_refuses_before_the_llm_and_a_file_edit_changes_it(reasoning, embedding_service,
                                                                         retrieval_port, tmp_path):
    path = quotas_file(tmp_path, f"keys:\n  {key_id(A)}: {{tokens_per_day: 10}}\n")
    app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}",
                      api_keys=f"{A},{B}", quotas_file=str(path), quota_request_tokens=5)
    async with asgi_client(app) as http:
        first = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": A})
        assert first.status_code == 200 and first.json()["usage"]["prompt_tokens"] >= 10
        refused = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": A})
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "quota_exceeded" and "10 tokens per day" in error["message"]
        assert 0 < int(refused.headers["retry-after"]) <= 86400
        other = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": B})
        assert other.status_code == 200  # another key, no quota
        path.write_text(f"keys:\n  {key_id(A)}: {{tokens_per_day: 100000, soft: 0.0001}}\n", encoding="utf-8")
        later = time.time() + 5
        os.utime(path, (later, later))  # a new modification time, whatever the clock's resolution
        await asyncio.sleep(1.1)  # the file is looked at once a second at most
        again = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": A})
        assert again.status_code == 200 and again.headers["x-quota-warning"].startswith("day tokens")
        path.write_text("keys: [not a mapping", encoding="utf-8")
        os.utime(path, (later + 5, later + 5))
        await asyncio.sleep(1.1)
        kept = await http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": A})
        assert kept.status_code == 200  # a broken file keeps the quotas before it


async def test_sixteen_concurrent_callers_overshoot_by_at_most_one_request(reasoning, embedding_service,
                                                                           retrieval_port, tmp_path):
    probe_app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}")
    async with asgi_client(probe_app) as http:
        usage = (await http.post("/v1/chat/completions", json=CHAT)).json()["usage"]
    per_request = usage["prompt_tokens"] + usage["completion_tokens"]
    limit = 5 * per_request
    path = quotas_file(tmp_path, f"keys:\n  {key_id(C)}: {{tokens_per_day: {limit}}}\n")
    app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}",
                      api_keys=C, quotas_file=str(path), quota_request_tokens=per_request)
    async with asgi_client(app) as http:
        answers = await asyncio.gather(*(http.post("/v1/chat/completions", json=CHAT, headers={"X-API-Key": C})
                                         for _ in range(16)))
        codes = [r.status_code for r in answers]
        assert set(codes) <= {200, 429}
        used = sum(r.json()["usage"]["prompt_tokens"] + r.json()["usage"]["completion_tokens"]
                   for r in answers if r.status_code == 200)
        assert used <= limit + per_request and codes.count(200) >= 1


async def test_two_instances_on_one_redis_share_the_quota_and_the_counters(reasoning, embedding_service,
                                                                          retrieval_port, tmp_path, redis_url):
    probe_app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets=f"127.0.0.1:{reasoning.port}")
    async with asgi_client(probe_app) as http:
        usage = (await http.post("/v1/chat/completions", json=CHAT)).json()["usage"]
    per_request = usage["prompt_tokens"] + usage["completion_tokens"]
    limit = 4 * per_request
    kid = key_id(C)
    path = quotas_file(tmp_path, f"keys:\n  {kid}: {{tokens_per_month: {limit}}}\n")
    options = {"reasoning_targets": f"127.0.0.1:{reasoning.port}", "api_keys": C, "quotas_file": str(path),
               "quota_request_tokens": per_request, "sessions_redis_url": redis_url}
    one = gateway_app(embedding_service.port, retrieval_port, **options)
    two = gateway_app(embedding_service.port, retrieval_port, **options)
    async with asgi_client(one) as h1, asgi_client(two) as h2:
        answers = await asyncio.gather(*((h1 if i % 2 else h2).post(
            "/v1/chat/completions", json=CHAT, headers={"X-API-Key": C}) for i in range(16)))
        ok = [r for r in answers if r.status_code == 200]
        used = sum(r.json()["usage"]["prompt_tokens"] + r.json()["usage"]["completion_tokens"] for r in ok)
        assert used <= limit + per_request and all(r.status_code in (200, 429) for r in answers)
        seen = (await h2.get("/v1/usage", params={"group_by": "key"}, headers={"X-API-Key": C})).json()
        assert seen["total"]["requests"] == len(ok)  # counted by both instances, read from either
        assert seen["total"]["prompt_tokens"] == sum(r.json()["usage"]["prompt_tokens"] for r in ok)
