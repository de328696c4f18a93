"""Fuzzed files against the OCR service as a process (issue 75): each a reading or a named 400, health answered.

The structure-aware strategies of tests/unit/ocr/test_file_fuzz.py (HTML, PDF, DOCX, text, images, all
mutated) go to one running ``services.ocr`` process through ``ReadFile``; after each, its health check
must answer within 1 s and the answer must be a reading or INVALID_ARGUMENT — never INTERNAL, never a
deadline. The process runs with the event-loop guard (tests/conftest.py): a callback holding its loop
over 200 ms fails the test too. A fixed number of examples keeps it within CI's budget.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient
from services.runtime.processes import start_process, stop_process
from support import RedisServer

pytestmark = pytest.mark.slow

# The unit fuzz module's strategies (tests/unit is not a package: loaded by path).
_spec = importlib.util.spec_from_file_location("file_fuzz", Path(__file__).parents[1] / "unit/ocr/test_file_fuzz.py")
assert _spec is not None and _spec.loader is not None
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

FILES = st.one_of(fuzz.mutated(fuzz.html_files()), fuzz.mutated(fuzz.pdf_files()), fuzz.mutated(fuzz.docx_files()),
                  fuzz.mutated(fuzz.image_files()), st.binary(min_size=1, max_size=3000))


@pytest.fixture(scope="module")
def ocr_port(tmp_path_factory):
    redis = RedisServer(tmp_path_factory.mktemp("fuzz-redis")).start()
    proc, port = start_process("services.ocr", "--port", "0", "--redis-url", redis.url, "--engines", "1",
                               "--max-file-ocr-pages", "2")
    yield port
    stop_process(proc)
    redis.stop()


def _read_then_health(port: int, data: bytes) -> tuple[str, float]:
    async def run() -> tuple[str, float]:
        client = AsyncOcrClient(f"127.0.0.1:{port}", timeout_s=30)
        try:
            await client.read_file(data, timeout_s=30)
            outcome = "read"
        except MeshClientError as err:
            outcome = err.code.name
        finally:
            await client.close()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            t = time.perf_counter()
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            return outcome, time.perf_counter() - t

    return asyncio.run(run())


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(FILES)
def test_fuzzed_files_are_read_or_refused_and_the_service_answers(ocr_port, data):
    outcome, health_s = _read_then_health(ocr_port, data)
    assert outcome in ("read", "INVALID_ARGUMENT"), (outcome, data[:80])
    assert health_s < 1.0, health_s
