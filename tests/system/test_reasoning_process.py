"""The reasoning service as a process in front of the real LLM server process: a SIGTERM during a
stream lets the stream finish (graceful stop), and the process exits cleanly."""

from __future__ import annotations

import asyncio
import signal

import grpc
import pytest
from mesh.reasoning.v1 import reasoning_pb2 as pb
from mesh.reasoning.v1 import reasoning_pb2_grpc as pb_grpc

from scripts.processes import start_process

pytestmark = pytest.mark.slow


def test_sigterm_mid_stream_finishes_the_stream_then_exits(llm_server):
    proc, port = start_process("services.reasoning", "--port", "0", "--backend-url", llm_server.base_url,
                               "--grace-period-s", "60", timeout_s=120)
    try:
        async def scenario() -> list[str]:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.ReasoningServiceStub(channel)
                kinds = []
                call = stub.Generate(pb.GenerateRequest(prompt="서울을 한 문장으로 소개해 주세요.", options=pb.Options(
                    max_tokens=16, timeouts=pb.Timeouts(first_token_s=60, generation_s=60, total_s=120))))
                async for event in call:
                    kind = event.WhichOneof("event")
                    if not kinds:
                        proc.send_signal(signal.SIGTERM)  # stop while the stream is open
                    kinds.append(kind)
                return kinds

        kinds = asyncio.run(scenario())
        assert kinds[-1] == "done" and set(kinds[:-1]) == {"delta"}
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
