"""Admission control (rate limits, shedding) and the 503 a request gets when the gateway stops under it."""

import asyncio
import json

import httpx
import pytest

from gateway.http.admission import RateLimit, Shedding, TokenBuckets
from gateway.http.telemetry import RequestTelemetry


def test_token_bucket_allows_a_burst_then_the_rate():
    b = TokenBuckets(rate=2.0, burst=3)
    assert [b.take("k", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take("k", now=0.0) == pytest.approx(0.5)  # refused: the next token comes in 1/rate
    assert b.take("other", now=0.0) == 0.0  # callers do not share a bucket
    assert b.take("k", now=0.5) == 0.0  # refilled at 2/s
    assert b.take("k", now=0.5) > 0


def test_token_buckets_forget_the_least_recent_callers():
    b = TokenBuckets(rate=1.0, burst=1, max_callers=2)
    for caller in ("a", "b", "c"):
        b.take(caller, now=0.0)
    assert b.take("a", now=0.0) == 0.0  # "a" was forgotten (fresh bucket), memory stays bounded
    assert b.take("c", now=0.0) > 0


async def _ok(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def test_rate_limit_answers_429_with_retry_after_per_key():
    app = RateLimit(_ok, rate=1.0, burst=2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        codes = [(await http.get("/v1/search", headers={"X-API-Key": "a"})).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        refused = await http.get("/v1/search", headers={"X-API-Key": "a"})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["code"] == "rate_limited" and refused.json()["error"]["retryable"]
        assert (await http.get("/v1/search", headers={"X-API-Key": "b"})).status_code == 200
        assert (await http.get("/healthz")).status_code == 200  # only /v1/ is limited


def held_app():
    """An ASGI app whose requests wait for ``release``; ``entered`` counts the ones inside."""
    release = asyncio.Event()
    entered = asyncio.Semaphore(0)

    async def slow(scope, receive, send):
        entered.release()
        await release.wait()
        await _ok(scope, receive, send)

    return slow, release, entered


async def test_shedding_refuses_beyond_the_cap_instead_of_queueing():
    slow, release, entered = held_app()
    app = Shedding(slow, limits={"/v1/search": 2}, wait_s=0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        held = [asyncio.create_task(http.post("/v1/search")) for _ in range(2)]
        for _ in range(2):
            await entered.acquire()  # both slots taken
        refused = await http.post("/v1/search")
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        release.set()
        assert [(await t).status_code for t in held] == [200, 200]
        assert (await http.post("/v1/search")).status_code == 200  # slots are given back


async def test_a_shed_chat_completion_is_429_in_openais_shape():
    slow, release, entered = held_app()
    app = Shedding(slow, limits={"/v1/chat": 1}, wait_s=0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        held = asyncio.create_task(http.post("/v1/chat"))
        await entered.acquire()
        refused = await http.post("/v1/chat/completions")  # the same group as /v1/chat
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert refused.json()["error"] | {"message": ""} == {"message": "", "type": "rate_limit_error", "param": None,
                                                             "code": "overloaded"}
        release.set()
        assert (await held).status_code == 200


async def test_a_request_cut_off_by_shutdown_gets_503_not_500():
    started = asyncio.Event()

    async def never_answers(scope, receive, send):
        started.set()
        await asyncio.Event().wait()

    app = RequestTelemetry(never_answers, routes=[])
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/v1/search", "headers": []}
    task = asyncio.create_task(app(scope, receive, send))
    await started.wait()
    task.cancel()  # what uvicorn does when its graceful-shutdown timeout passes
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sent[0]["status"] == 503 and (b"retry-after", b"1") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["retryable"] is True
