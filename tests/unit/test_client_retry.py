"""Retries are configured for idempotent RPCs only, and really retry on UNAVAILABLE."""

import json

import grpc
import pytest

from clients.retry import retry_options
from support.servers import aio_grpc_server


def test_service_config_names_only_the_given_methods():
    opts = dict(retry_options("mesh.retrieval.v1.RetrievalService", ["Search"]))
    cfg = json.loads(opts["grpc.service_config"])["methodConfig"][0]
    assert cfg["name"] == [{"service": "mesh.retrieval.v1.RetrievalService", "method": "Search"}]
    assert cfg["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"] and opts["grpc.enable_retries"] == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_a_retried_call_succeeds_after_transient_unavailable():
    calls = {"n": 0}

    async def flaky(request, context):
        calls["n"] += 1
        if calls["n"] < 3:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "transient")
        return b"ok"

    handler = grpc.method_handlers_generic_handler("t.S", {
        "Search": grpc.unary_unary_rpc_method_handler(flaky, lambda b: b, lambda b: b),
        "Create": grpc.unary_unary_rpc_method_handler(flaky, lambda b: b, lambda b: b)})
    async with aio_grpc_server(handler) as port:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=retry_options("t.S", ["Search"])) as ch:
            assert await ch.unary_unary("/t.S/Search")(b"x", timeout=5) == b"ok" and calls["n"] == 3
            calls["n"] = 0
            with pytest.raises(grpc.aio.AioRpcError):  # not idempotent: no retry
                await ch.unary_unary("/t.S/Create")(b"x", timeout=5)
            assert calls["n"] == 1
