"""Backend tools (issue 61): declared in a file, called with checked arguments, no redirects, bounded answers,
identical calls cached. The backend is a local HTTP stand-in (a real server on loopback), as no operator's
backend exists here."""

from __future__ import annotations

import json
import time

import pytest

from bench.standin import ToolBackendStandIn
from gateway.assistant.backend_tools import BackendTools, ToolError, ToolFileError, load_backend_tools, sign, verify

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["role"],
          "properties": {"role": {"type": "string", "minLength": 1}, "location": {"type": "string"}}}


SECRET = "s3cret-of-the-jobs-tool"


@pytest.fixture(scope="module")
def backend():
    standin = ToolBackendStandIn(slow_s=2.0, secret=SECRET.encode())
    yield standin.base, standin.requests
    standin.close()


def tools_file(tmp_path, base: str, **extra) -> str:
    tools = [{"name": name, "description": "채용 공고 검색", "parameters": SCHEMA, "url": f"{base}/{path}",
              "timeout_s": 0.5, "secret": SECRET, **extra}
             for name, path in (("job_postings", "ok"), ("redirecting", "redirect"), ("huge", "big"), ("slow", "slow"))]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"allowed_hosts": ["127.0.0.1"], "tools": tools}), encoding="utf-8")
    return str(path)


async def test_a_call_is_checked_sent_once_and_then_served_from_the_cache(backend, tmp_path):
    base, seen = backend
    tools = BackendTools(load_backend_tools(tools_file(tmp_path, base)))
    try:
        before = len(seen)
        value, cached = await tools.call("job_postings", {"role": "백엔드", "location": "판교"}, "k-a", "1")
        assert not cached and value["postings"][0]["role"] == "백엔드"  # signed: the stand-in verified it
        assert seen[-1] == {"path": "/ok", "tool": "job_postings", "arguments": {"role": "백엔드", "location": "판교"},
                            "caller": "k-a:1", "key_id": "k-a"}
        assert value["postings"][0]["caller"] == "k-a:1"
        t = time.perf_counter()
        again, cached = await tools.call("job_postings", {"location": "판교", "role": "백엔드"}, "k-a", "1")
        assert cached and again == value and (time.perf_counter() - t) < 0.005  # the seed's 5 ms, key order aside
        _, cached = await tools.call("job_postings", {"role": "백엔드", "location": "판교"}, "k-a", "2")
        assert not cached and len(seen) == before + 2  # another caller is not served someone else's answer
        other, cached = await tools.call("job_postings", {"role": "백엔드", "location": "판교"}, "k-b", "1")
        assert not cached and other["postings"][0]["caller"] == "k-b:1"  # another team's user 1: another caller
        with pytest.raises(ToolError) as err:
            await tools.call("job_postings", {"role": ""}, "k-a", "1")
        assert err.value.kind == "arguments" and len(seen) == before + 3  # never sent
    finally:
        await tools.close()


@pytest.mark.parametrize(("name", "kind"), [("redirecting", "redirect"), ("huge", "too_large"), ("slow", "timeout")])
async def test_a_backend_that_redirects_answers_too_much_or_hangs_is_a_clear_error(backend, tmp_path, name, kind):
    base, _ = backend
    tools = BackendTools(load_backend_tools(tools_file(tmp_path, base)))
    try:
        t = time.perf_counter()
        with pytest.raises(ToolError) as err:
            await tools.call(name, {"role": "백엔드"}, "k-a", "1")
        assert err.value.kind == kind and time.perf_counter() - t < 1.5
    finally:
        await tools.close()


def test_the_file_refuses_hosts_off_the_list_plain_http_and_bad_schemas(tmp_path):
    def write(tool: dict, hosts=("api.example.com",)) -> str:
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"allowed_hosts": list(hosts), "tools": [tool]}), encoding="utf-8")
        return str(path)

    good = {"name": "job_postings", "description": "d", "parameters": SCHEMA, "url": "https://api.example.com/x",
            "secret": SECRET}
    assert set(load_backend_tools(write(good))) == {"job_postings"}
    for bad, why in [({**good, "url": "https://evil.example.com/x"}, "not in allowed_hosts"),
                     ({**good, "url": "http://api.example.com/x"}, "https://"),
                     ({**good, "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}, "JSON schema"),
                     ({**good, "name": "Bad-Name"}, "snake_case"),
                     ({**good, "timeout_s": 120}, "timeout_s"),
                     ({k: v for k, v in good.items() if k != "secret"}, "signed with"),
                     ({**good, "secret": "short"}, "signed with")]:
        with pytest.raises(ToolFileError, match=why):
            load_backend_tools(write(bad))


def test_a_task_argument_is_the_persons_words_when_its_character_pairs_are_in_the_message():
    from gateway.assistant.calls import MIN_OWN_WORDS, own_words

    message = "이력서: 백엔드 개발 4년, 자바와 스프링. 공고: 자바/스프링 3년 이상, 카프카 우대. 분석해 줘"
    assert own_words("자바/스프링 3年 이상, 카프카우대", message) >= MIN_OWN_WORDS  # copied, one glyph slipped
    assert own_words("백엔드 개발 4년, 자바와 스프링", message) == 1.0
    assert own_words("파이썬 7년, 머신러닝 플랫폼 구축", message) < MIN_OWN_WORDS  # written by the model


async def test_a_call_signed_with_another_secret_is_refused_by_the_backend(backend, tmp_path):
    base, seen = backend
    tools = BackendTools(load_backend_tools(tools_file(tmp_path, base, secret="not-the-backends-secret")))
    try:
        before = len(seen)
        with pytest.raises(ToolError) as err:
            await tools.call("job_postings", {"role": "백엔드"}, "k-a", "1")
        assert err.value.kind == "http" and "401" in err.value.message and len(seen) == before
    finally:
        await tools.close()


def test_the_signature_covers_the_body_and_the_time():
    body = b'{"tool":"t","arguments":{},"caller":"k-a:1","key_id":"k-a"}'
    headers = sign(b"k" * 16, body, now=1_000_000)
    ts, sig = headers["X-Mesh-Timestamp"], headers["X-Mesh-Signature"]
    assert verify(b"k" * 16, body, ts, sig, now=1_000_010)
    assert not verify(b"k" * 16, body.replace(b"k-a:1", b"k-b:1"), ts, sig, now=1_000_010)  # a changed caller
    assert not verify(b"k" * 16, body, ts, sig, now=1_000_000 + 301)  # a replay after five minutes
    assert not verify(b"x" * 16, body, ts, sig, now=1_000_010)
