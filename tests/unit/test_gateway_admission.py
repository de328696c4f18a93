"""Admission control (rate limits, shedding) and the 503 a request gets when the gateway stops under it."""

import asyncio
import json

import httpx
import pytest

from gateway.app import admission_groups
from gateway.config import GatewaySettings
from gateway.http.admission import Group, RateLimit, Shedding, Slots, TokenBuckets
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
    app = Shedding(slow, [Group(Slots("search", 2), ("/v1/search",))], wait_s=0.05)
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
    app = Shedding(slow, [Group(Slots("llm", 1), ("/v1/chat",))], wait_s=0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        held = asyncio.create_task(http.post("/v1/chat"))
        await entered.acquire()
        refused = await http.post("/v1/chat/completions")  # the same group as /v1/chat
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert refused.json()["error"] | {"message": ""} == {"message": "", "type": "rate_limit_error", "param": None,
                                                             "code": "overloaded"}
        release.set()
        assert (await held).status_code == 200


async def test_every_llm_route_draws_on_one_cap_and_reads_take_none():
    # Before: a semaphore per path prefix, so the cap was granted once per route group (six times in
    # all) and reading an interview took an LLM slot.
    slow, release, entered = held_app()
    slots = Slots("llm", 1)
    groups = admission_groups(GatewaySettings(max_inflight_llm=1), slots)
    app = Shedding(slow, groups, wait_s=0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        held = asyncio.create_task(http.post("/v1/chat"))
        await entered.acquire()
        for path in ("/v1/answers", "/v1/tasks/resume_analysis", "/v1/interviews/x/answers",
                     "/v1/conversations", "/v1/summaries", "/v1/recommendations"):
            refused = await http.post(path)
            assert refused.status_code == 429 and "(llm)" in refused.json()["error"]["message"], path
        reading = asyncio.create_task(http.get("/v1/interviews/x"))  # a read of stored state: no slot
        await entered.acquire()
        assert not await slots.try_acquire()  # background work (a preparation) is skipped, not queued
        release.set()
        assert [(await t).status_code for t in (held, reading)] == [200, 200]
        assert await slots.try_acquire()  # given back
        slots.release()


async def test_a_request_refused_by_its_second_cap_gives_the_first_back():
    slow, release, entered = held_app()
    search, llm = Slots("search", 4), Slots("llm", 1)
    app = Shedding(slow, [Group(search, ("/v1/search", "/v1/recommendations")),
                          Group(llm, ("/v1/recommendations",), frozenset({"POST"}))], wait_s=0.05)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        held = asyncio.create_task(http.post("/v1/recommendations"))
        await entered.acquire()
        assert (await http.post("/v1/recommendations")).status_code == 429
        release.set()
        assert (await held).status_code == 200
        assert [await search.try_acquire() for _ in range(4)] == [True] * 4  # every search slot came back


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


async def test_an_interview_preparation_takes_an_llm_slot_or_is_skipped():
    # Before: preparations ran outside any cap. Now one takes a slot of the shared LLM cap when one is
    # free, and is skipped (the question written when the answer comes) when none is.
    from prometheus_client import REGISTRY

    from gateway.interviews.sessions import Interviews
    from gateway.tasks.store import MemoryKeyValue

    slots = Slots("llm", 1)
    interviews = Interviews(None, MemoryKeyValue(), ttl_s=60, follow_up_below=0, slots=slots)  # type: ignore[arg-type]
    assert await slots.try_acquire()  # a chat holds the only slot
    before = REGISTRY.get_sample_value("mesh_gateway_interview_preparations_total", {"outcome": "skipped"}) or 0
    await interviews._prepared("a" * 32, 2)  # would need the task runner (None here) if it ran
    after = REGISTRY.get_sample_value("mesh_gateway_interview_preparations_total", {"outcome": "skipped"})
    assert after == before + 1
    slots.release()
