"""The reasoning service as a process in front of the real LLM server process: a SIGTERM during a
stream lets the stream finish (graceful stop), and the process exits cleanly."""

from __future__ import annotations

import asyncio
import signal

import pytest

from clients.reasoning import AsyncReasoningClient, Options, Timeouts
from services.runtime.processes import start_process

pytestmark = pytest.mark.slow


def test_sigterm_mid_stream_finishes_the_stream_then_exits(llm_server):
    proc, port = start_process("services.reasoning", "--port", "0", "--backend-url", llm_server.base_url,
                               "--grace-period-s", "60", timeout_s=120)
    try:
        async def scenario() -> list[str]:
            async with AsyncReasoningClient(f"127.0.0.1:{port}", timeout_s=180) as client:
                kinds = []
                async for event in client.generate("서울을 한 문장으로 소개해 주세요.", options=Options(
                        max_tokens=16, timeouts=Timeouts(first_token_s=60, generation_s=60, total_s=120))):
                    if not kinds:
                        proc.send_signal(signal.SIGTERM)  # stop while the stream is open
                    kinds.append(type(event).__name__)
                return kinds

        kinds = asyncio.run(scenario())
        assert kinds[-1] == "Done" and set(kinds[:-1]) == {"Delta"}
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_client_leaving_an_sse_chat_cancels_the_backend_request_through_the_mesh():
    """HTTP client -> gateway -> gRPC -> reasoning -> backend HTTP: closing the SSE stream at the
    front reaches the backend (a stand-in that would otherwise stream for 30 s sees the close)."""
    import httpx

    from services.runtime.processes import stop_process
    from support.standins import ObservedChatStandIn

    # The first request is the reasoning process's warm-up; the second is the chat that stalls.
    standin = ObservedChatStandIn([{"chunks": ["준비"]}, {"chunks": ["첫", "둘"], "stall_after": 1}])
    procs = []
    try:
        rs, rs_port = start_process("services.reasoning", "--port", "0", "--backend-url", standin.url)
        procs.append(rs)
        gw, gw_port = start_process("gateway", "--port", "0", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--reasoning-generation-s", "60", "--reasoning-total-s", "60")
        procs.append(gw)
        with httpx.stream("POST", f"http://127.0.0.1:{gw_port}/v1/chat", timeout=30,
                          json={"session_id": "leave", "message": "길게 말해 주세요"}) as resp:
            lines = resp.iter_lines()
            assert next(lines) == "event: delta"
        assert standin.cut_short.wait(10), "the backend never saw the client leave"
        assert standin.closed_early == 1
    finally:
        for p in procs:
            stop_process(p)
        standin.close()
