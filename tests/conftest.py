"""Shared fixtures: the built model, a real embedding server on port 0, clients, Redis.

Helpers shared by tests (ports, Redis, processes, waiting, stand-ins) live in ``tests/support`` and
are imported as ``support``: pytest puts this folder (the first without ``__init__.py`` above this
conftest) on ``sys.path`` before any test module is imported.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from services.embedding.server import EmbeddingService
from services.runtime.loopguard import LoopWatchdog
from services.runtime.models import current_model_dir
from support import RedisServer, free_port
from support.servers import running_embedding

# The tests start gateway processes on loopback without API keys; outside such local runs a gateway
# with no key refuses to start (tested in tests/system/test_process_control.py).
os.environ.setdefault("MESH_GATEWAY_ALLOW_NO_AUTH", "1")

collect_ignore = ["support"]  # helpers, not tests

# The event-loop guard (issue 75): a callback that holds an event loop longer than 200 ms fails the test that
# was running. In this process (in-process servers and the gateway on the session loop) a watchdog times
# every callback; service and gateway processes the tests start get the same guard from their settings
# (inherited environment) and append to the same file.
LOOP_STALL_MS = 200
STALL_FILE = Path(tempfile.gettempdir()) / f"mesh-loop-stalls-{os.getpid()}.log"
STALL_FILE.unlink(missing_ok=True)
for _prefix in ("EMBEDDING", "RETRIEVAL", "REASONING", "OCR", "GATEWAY"):
    os.environ.setdefault(f"MESH_{_prefix}_LOOP_STALL_MS", str(LOOP_STALL_MS))
    os.environ.setdefault(f"MESH_{_prefix}_LOOP_STALL_FILE", str(STALL_FILE))


@pytest.fixture(scope="session", autouse=True)
def _loop_watchdog():
    """Times every callback of the loops that run on this thread (the session loop of the async tests)."""
    dog = LoopWatchdog(LOOP_STALL_MS / 1000, "pytest", STALL_FILE)
    dog.start()
    yield dog
    dog.stop()


@pytest.fixture(autouse=True)
def _no_loop_stalls(request, _loop_watchdog):
    """Fail the test during which any loop (here or in a process the tests started) was held over 200 ms."""
    before = STALL_FILE.stat().st_size if STALL_FILE.exists() else 0
    yield
    layer = Path(str(request.node.fspath)).parent.name
    if layer not in ("service", "system") or request.node.get_closest_marker("loop_stalls_allowed") \
            or not STALL_FILE.exists():
        return
    with STALL_FILE.open(encoding="utf-8") as report:
        report.seek(before)
        stalls = report.read()
    # "---" opens a stall a callback caused; "~~~" one where the loop waited for the GIL another thread kept
    # (reported in the file and the log, not failed on). In system tests the services are processes: this
    # process's loops are the test's own clients.
    own = f"(pid {os.getpid()}):"
    stalls = "".join(block for block in re.split(r"(?m)^(?=(?:---|~~~) )", stalls)
                     if block.startswith("--- ") and not (layer == "system" and own in block.split("\n")[0]))
    if stalls:
        pytest.fail(f"an event loop was held over {LOOP_STALL_MS} ms during this test:\n{stalls[:6000]}",
                    pytrace=False)


@pytest.fixture(scope="session")
def model_dir() -> Path:
    path = current_model_dir()
    if not (path / "manifest.json").exists():
        pytest.fail(f"model files missing in {path}: run scripts/setup.sh (it builds them)")
    return path


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def embedding_service(model_dir: Path):
    async with running_embedding(model_dir, max_texts_per_request=64, metrics_port=0) as service:
        yield service


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aio_channel(embedding_service: EmbeddingService):
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{embedding_service.port}")
    yield channel
    await channel.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A real redis-server on a free port, answering PING before the first test uses it; stopped at the end."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture
def vision_standin():
    from bench.standin import VisionStandIn

    standin = VisionStandIn()
    yield standin
    standin.close()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """The real embedded LLM server (llama.cpp, the pinned GGUF model) on a free port."""
    from infra.llm.server import start_llm_server

    server = start_llm_server(free_port(), log_path=tmp_path_factory.mktemp("llm") / "llm.log")
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter):
    """After a run that checked streamed events: the declared events no test received (issue 82)."""
    from support import sse

    if sse.SEEN:
        missing = sse.unseen()
        terminalreporter.write_line(f"stream events checked against the spec: {len(sse.SEEN)}; declared but "
                                    f"never received in this run: {len(missing)}")
        for line in missing:
            terminalreporter.write_line(f"  {line}")


def pytest_collection_modifyitems(config, items):
    """Mark long tests in one place: every real-LLM test ``llm`` and ``slow``, every system test ``slow``.

    ``make test-fast`` (``-m "not slow"``) runs the rest; ``make test`` runs everything.
    """
    for item in items:
        if "llm_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.llm)
            item.add_marker(pytest.mark.slow)
        if "/tests/system/" in str(item.fspath):
            item.add_marker(pytest.mark.slow)
