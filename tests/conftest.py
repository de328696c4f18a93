"""Shared fixtures: the built model, a real embedding server on port 0, clients."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from services.embedding.config import EmbeddingSettings
from services.embedding.modelbuild.paths import current_model_dir
from services.embedding.server import EmbeddingService, create_embedding_service

KOREAN_QUERIES = [
    "비 오는 날 읽기 좋은 소설",
    "부모님 결혼기념일 선물 추천",
    "신입 백엔드 개발자 면접 질문",
    "가성비 좋은 무선 청소기",
]


@pytest.fixture(scope="session")
def model_dir() -> Path:
    path = current_model_dir()
    if not (path / "manifest.json").exists():
        pytest.fail(f"model files missing in {path}: run scripts/setup.sh (it builds them)")
    return path


def make_settings(model_dir: Path, **overrides) -> EmbeddingSettings:
    base = dict(host="127.0.0.1", port=0, metrics_port=-1, model_dir=model_dir, precision="int8",
                intra_op_threads=1)
    base.update(overrides)
    return EmbeddingSettings(**base)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def embedding_service(model_dir: Path):
    service: EmbeddingService = await create_embedding_service(
        make_settings(model_dir, max_texts_per_request=64, metrics_port=0), registry=CollectorRegistry())
    await service.mesh.start()
    await service.warm_up()
    yield service
    await service.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aio_channel(embedding_service: EmbeddingService):
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{embedding_service.port}")
    yield channel
    await channel.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A real redis-server on a free port (scripts/setup.sh installs it); missing it fails, not skips."""
    import shutil
    import subprocess
    import time

    import redis

    assert shutil.which("redis-server"), "redis-server missing: run scripts/setup.sh"
    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(10)


class VisionStandIn:
    """A local stand-in for a VLM server speaking the OpenAI vision chat protocol.

    No VLM weights can be obtained on these machines, so this is not a model: it checks the request
    has the protocol's shape (a text part and a base64 PNG data URL), decodes the image, and answers
    with a transcription naming the image's size. ``stall_s`` makes it hang (timeout tests).
    """

    def __init__(self) -> None:
        import http.server
        import threading

        self.requests: list[dict] = []
        self.stall_s = 0.0
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                import base64
                import io
                import json
                import time

                from PIL import Image

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append(body)
                if standin.stall_s:
                    time.sleep(standin.stall_s)
                try:
                    assert self.path == "/v1/chat/completions", self.path
                    parts = body["messages"][0]["content"]
                    text = next(p for p in parts if p["type"] == "text")["text"]
                    url = next(p for p in parts if p["type"] == "image_url")["image_url"]["url"]
                    assert text and url.startswith("data:image/png;base64,")
                    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
                    answer = f"스탠드인 판독 {img.width}x{img.height}\n둘째 줄"
                    status, out = 200, {"id": "standin", "object": "chat.completion", "model": body["model"],
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": answer}}]}
                except (AssertionError, KeyError, StopIteration, OSError) as err:
                    status, out = 400, {"error": {"message": f"bad request: {err!r}"}}
                data = json.dumps(out, ensure_ascii=False).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def vision_standin():
    standin = VisionStandIn()
    yield standin
    standin.close()


class ChatStandIn:
    """A local stand-in for an OpenAI-compatible chat server, for failures a real server cannot be
    made to show on demand (stalls, broken streams, schema-breaking answers). Not a model: each
    request takes the next scripted behaviour (the last one repeats):

    ``{"chunks": ["안", "녕"], "first_delay_s": 0, "stall_after": None, "break_after": None,
    "status": 200}`` -- stream ``chunks`` as SSE deltas; wait ``first_delay_s`` before the first;
    after ``stall_after`` chunks hang (until the client goes away); after ``break_after`` chunks
    close the connection without ``[DONE]``.
    """

    def __init__(self, script: list[dict]) -> None:
        import http.server
        import threading

        self.script = script
        self.requests: list[dict] = []
        self.closed_early = 0
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                import json
                import time

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append(body)
                plan = standin.script[min(len(standin.requests), len(standin.script)) - 1]
                if plan.get("status", 200) != 200:
                    self.send_response(plan["status"])
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted failure"}')
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    time.sleep(plan.get("first_delay_s", 0))
                    for i, text in enumerate(plan.get("chunks", ["네"])):
                        if plan.get("stall_after") is not None and i >= plan["stall_after"]:
                            for _ in range(600):  # hang; a cancelled client shows as a broken pipe
                                time.sleep(0.05)
                                self.wfile.write(b": keep-alive\n\n")
                                self.wfile.flush()
                        if plan.get("break_after") is not None and i >= plan["break_after"]:
                            return
                        event = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                        self.wfile.flush()
                    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": len(plan.get("chunks", ["네"]))}}
                    self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    standin.closed_early += 1

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """The real embedded LLM server (llama.cpp, the pinned GGUF model) on a free port."""
    from infra.llm.server import start_llm_server

    server = start_llm_server(free_port(), log_path=tmp_path_factory.mktemp("llm") / "llm.log")
    yield server
    server.stop()
