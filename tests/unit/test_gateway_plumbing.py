"""The gateway's plumbing on its own: circuit breaker, cache keys and caches, deadlines, the body limit."""

from __future__ import annotations

import json
import logging
import time
import types
import unicodedata

import numpy as np
import pytest
from prometheus_client import REGISTRY

from gateway.http.deadline import MAX_MS, TIMEOUT_HEADER, Deadline, parse_timeout
from gateway.http.errors import ApiError
from gateway.http.limits import BodyLimit
from gateway.vectors import breaker as breaker_module
from gateway.vectors.breaker import CircuitBreaker, export_state
from gateway.vectors.cache import LocalLruCache, RedisCache, cache_key
from support import RedisServer

# -- circuit breaker ---------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch):
    """The breaker's clock, moved by the test (only the breaker module sees it)."""
    now = types.SimpleNamespace(t=1000.0)
    monkeypatch.setattr(breaker_module, "time", types.SimpleNamespace(monotonic=lambda: now.t))
    return now


def test_breaker_opens_after_n_consecutive_failures_only(clock):
    b = CircuitBreaker(failures=3, reset_s=10)
    for _ in range(2):
        b.failure()
    b.success()  # not consecutive: the count starts again
    b.failure()
    b.failure()
    assert b.state == "closed" and b.allow()
    b.failure()
    assert b.state == "open" and not b.allow()


def test_breaker_half_opens_after_the_pause_with_one_trial_call(clock):
    b = CircuitBreaker(failures=1, reset_s=10)
    b.failure()
    clock.t += 9.9
    assert b.state == "open" and not b.allow()
    clock.t += 0.1
    assert b.state == "half-open"
    assert b.allow() and not b.allow()  # one trial at a time
    b.success()
    assert b.state == "closed" and b.allow() and b.allow()


def test_a_failed_trial_opens_the_breaker_for_another_full_pause(clock):
    b = CircuitBreaker(failures=2, reset_s=10)
    b.failure()
    b.failure()
    clock.t += 10
    assert b.allow()
    b.failure()  # the trial failed: open again, counted from now
    assert b.state == "open"
    clock.t += 9.9
    assert not b.allow()
    clock.t += 0.1
    assert b.allow()


def test_the_breaker_state_is_exported_as_a_gauge(clock):
    b = CircuitBreaker(failures=1, reset_s=10)
    export_state(b, "plumbing-test")

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("mesh_gateway_breaker_open", {"dependency": "plumbing-test"})

    assert gauge() == 0.0
    b.failure()
    assert gauge() == 1.0
    clock.t += 10
    assert gauge() == 1.0  # half-open is not closed
    b.allow()
    b.success()
    assert gauge() == 0.0


# -- cache keys and caches ---------------------------------------------------------------------


def test_cache_key_normalises_text_and_separates_revision_and_kind():
    key = cache_key("rev-a", "query", "무선 청소기 추천")
    prefix, revision, kind, digest = key.split(":")
    assert (prefix, revision, kind) == ("emb", "rev-a", "query") and len(digest) == 64
    decomposed = unicodedata.normalize("NFD", "무선 청소기 추천")
    assert decomposed != "무선 청소기 추천"
    same = ["  무선   청소기\t추천\n", decomposed, "무선\u3000청소기 추천"]  # spaces, jamo, ideographic space
    assert {cache_key("rev-a", "query", t) for t in same} == {key}
    assert cache_key("ｒｅｖ", "query", "ＡＢＣ１") == cache_key("ｒｅｖ", "query", "ABC1")  # full-width forms
    different = [cache_key("rev-b", "query", "무선 청소기 추천"), cache_key("rev-a", "passage", "무선 청소기 추천"),
                 cache_key("rev-a", "query", "무선청소기 추천"), cache_key("rev-a", "query", "무선 청소기 추천!")]
    assert len({key, *different}) == 5


def cache_events(event: str) -> float:
    return REGISTRY.get_sample_value("mesh_gateway_embedding_cache_total", {"event": event}) or 0.0


async def test_local_cache_round_trips_float32_and_evicts_the_least_recently_used():
    cache = LocalLruCache(max_entries=2)
    misses, hits = cache_events("miss"), cache_events("hit")
    assert await cache.get("a") is None
    vec = np.array([0.25, -1.5, 3.0], dtype=np.float64)
    await cache.set("a", vec)
    vec[0] = 99  # the cache keeps its own copy
    got = await cache.get("a")
    assert got is not None and got.dtype == np.float32 and got.tolist() == [0.25, -1.5, 3.0]
    await cache.set("b", np.ones(3))
    assert await cache.get("a") is not None  # a is now the most recently used
    await cache.set("c", np.zeros(3))
    assert await cache.get("b") is None and await cache.get("a") is not None and await cache.get("c") is not None
    assert cache_events("miss") - misses == 2 and cache_events("hit") - hits == 4
    assert await cache.health() == "SERVING"


async def test_redis_cache_is_shared_expires_and_fails_open_logging_once(tmp_path, caplog):
    with RedisServer(tmp_path / "redis") as server:
        a, b = RedisCache(server.url, ttl_s=60), RedisCache(server.url, ttl_s=60)
        vec = np.arange(4, dtype=np.float32)
        await a.set("k", vec)
        np.testing.assert_array_equal(await b.get("k"), vec)  # another instance sees it
        assert 0 < await a._redis.ttl("k") <= 60
        assert await a.health() == "SERVING"

        errors = cache_events("error")
        server.kill()
        with caplog.at_level(logging.INFO, logger="gateway.vectors.cache"):
            assert await a.get("k") is None  # Redis gone: a miss, never an exception
            await a.set("k", vec)
            assert await a.get("k") is None
            assert await a.health(timeout_s=0.5) == "UNREACHABLE"
            assert cache_events("error") - errors == 3
            with RedisServer(tmp_path / "redis2", port=server.port):  # Redis back on the same port
                await a.set("k2", vec)
                np.testing.assert_array_equal(await a.get("k2"), vec)
        lines = [r.getMessage() for r in caplog.records if r.name == "gateway.vectors.cache"]
        assert len(lines) == 2 and "continuing without the shared cache" in lines[0] and "back" in lines[1], lines
        await a.close()
        await b.close()


# -- deadlines ---------------------------------------------------------------------------------


def test_parse_timeout_reads_the_header_or_falls_back_to_the_default():
    assert parse_timeout(None, 2000).total_s == 2.0
    assert parse_timeout("1500", 2000).total_s == 1.5
    assert parse_timeout("1", 2000).total_s == 0.001
    assert parse_timeout(str(MAX_MS), 2000).total_s == MAX_MS / 1000


@pytest.mark.parametrize("raw", ["0", "-5", str(MAX_MS + 1), "1.5", "x", ""])
def test_a_bad_timeout_header_is_a_400_naming_the_header(raw):
    with pytest.raises(ApiError) as info:
        parse_timeout(raw, 2000)
    assert info.value.status == 400
    assert [f.field for f in info.value.body.error.fields] == [TIMEOUT_HEADER]


def test_a_deadline_counts_down_and_is_a_retryable_504_once_spent():
    now = time.monotonic()
    fresh = Deadline(2.0, start=now)
    assert 1.9 < fresh.check() <= 2.0
    half = Deadline(2.0, start=now - 1.0)
    assert 0.9 < half.remaining() <= 1.0 and half.remaining() < fresh.remaining()
    spent = Deadline(2.0, start=now - 5.0)
    assert spent.remaining() == 0.0
    with pytest.raises(ApiError) as info:
        spent.check()
    assert info.value.status == 504 and info.value.body.error.code == "deadline_exceeded"
    assert info.value.body.error.retryable


# -- body limit --------------------------------------------------------------------------------


class EchoApp:
    """The app behind the limit: answers 200 with the length of the body it read."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def call(app, path: str, chunks: list[bytes], declared: int | None = None) -> tuple[int, bytes, int]:
    """Drive ``app`` with a request whose body arrives in ``chunks``; status, body and how many chunks were read."""
    headers = [] if declared is None else [(b"content-length", str(declared).encode())]
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    read = 0
    sent: list[dict] = []

    async def receive():
        nonlocal read
        read += 1
        return messages[read - 1] if read <= len(messages) else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read


def limited(limit: int = 100, **prefixes: int) -> tuple[BodyLimit, EchoApp]:
    inner = EchoApp()
    return BodyLimit(inner, limit, {k.replace("_", "/"): v for k, v in prefixes.items()}), inner


async def test_a_declared_body_over_the_limit_is_413_before_anything_is_read():
    app, inner = limited(100)
    status, body, read = await call(app, "/v1/search", [b"x" * 101], declared=101)
    assert status == 413 and read == 0 and inner.bodies == []
    error = json.loads(body)["error"]
    assert error["code"] == "payload_too_large" and "100" in error["message"]


async def test_a_chunked_body_over_the_limit_is_413_and_the_app_never_runs():
    app, inner = limited(100)
    status, _, read = await call(app, "/v1/search", [b"x" * 40] * 5)  # no Content-Length
    assert status == 413 and inner.bodies == [] and read == 3  # stopped at the chunk that crossed it
    status, _, _ = await call(app, "/v1/search", [b"x" * 40] * 5, declared=10)  # a declared length that lies
    assert status == 413 and inner.bodies == []


async def test_exactly_at_the_limit_is_accepted_declared_or_chunked():
    app, inner = limited(100)
    assert (await call(app, "/v1/search", [b"x" * 100], declared=100))[:2] == (200, b"100")
    assert (await call(app, "/v1/search", [b"x" * 50, b"y" * 50, b""]))[:2] == (200, b"100")
    assert inner.bodies[-1] == b"x" * 50 + b"y" * 50  # replayed to the app whole


async def test_each_path_prefix_has_its_own_limit():
    app, _ = limited(100, _v1_ocr_=1000, _v1_collections_=500)
    assert (await call(app, "/v1/ocr/jobs", [b"x" * 1000], declared=1000))[0] == 200
    assert (await call(app, "/v1/ocr/jobs", [b"x" * 1001]))[0] == 413
    assert (await call(app, "/v1/collections/books/documents", [b"x" * 500], declared=500))[0] == 200
    assert (await call(app, "/v1/collections/books/documents", [b"x" * 501], declared=501))[0] == 413
    assert (await call(app, "/v1/collections", [b"x" * 101], declared=101))[0] == 413  # not under the prefix
    assert (await call(app, "/v1/search", [b"x" * 101]))[0] == 413


async def test_non_http_scopes_pass_through():
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    await BodyLimit(inner, 1)({"type": "lifespan"}, None, None)
    assert seen == ["lifespan"]
