"""Run the mesh on embedded defaults: every service as a process, an example call, then serve.

Ctrl-C (or SIGTERM) stops every process cleanly.

Processes: Redis (shared cache and OCR job state, no persistence), the local LLM server (llama.cpp,
Qwen2.5-Coder-1.5B Q4) on 8081, embedding (ONNX Runtime int8) on 50051, retrieval (Qdrant Edge,
Korean BM25 + dense hybrid) on 50052, reasoning on 50053, OCR (Tesseract kor+eng) on 50054, and the
gateway (REST) on 8080.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from infra.llm.server import start_llm_server
from scripts.processes import start_process, start_redis

ROOT = Path(__file__).resolve().parent.parent
SERVICES = [
    ("embedding", ["-m", "services.embedding"]),
    ("retrieval", ["-m", "services.retrieval"]),  # embedded Qdrant Edge in .data/qdrant
    ("reasoning", ["-m", "services.reasoning"]),  # streams from the local LLM server
    ("ocr", ["-m", "services.ocr"]),  # Tesseract kor+eng; jobs in Redis
    ("gateway", ["-m", "gateway"]),  # REST on 8080
]
REDIS_PORT = 0  # a free port: each run has its own, unpersisted Redis
LLM_PORT = 8081
# A 1.5B model on two CPU cores writes ~10 tokens/s and a 5-item reasons call takes about a minute
# (bench/results/reasoning.md); the gateway's LLM deadlines are raised for the demo accordingly.
GATEWAY_LLM_FLAGS = ["--reasoning-first-token-s", "60", "--reasoning-generation-s", "120",
                     "--reasoning-total-s", "180", "--reasoning-timeout-ms", "200000"]
SAMPLE = ROOT / "gateway" / "sample_catalog.json"


def start(name: str, args: list[str]) -> tuple[subprocess.Popen[str], int]:
    """Start one service (own session, so Ctrl-C reaches only us) and echo its log with a prefix."""
    return start_process(args[1], *args[2:], echo=lambda line: print(f"[{name}] {line}", end="", flush=True),
                         new_session=True)


def ensure_catalog(gateway: str) -> None:
    """Create and ingest the bundled Korean sample catalog when it is not there yet (with progress)."""
    import httpx

    catalog = json.loads(SAMPLE.read_text())
    name = catalog["collection"]
    with httpx.Client(base_url=gateway, timeout=30) as http:
        if http.get(f"/v1/collections/{name}").status_code == 200:
            print(f"catalog {name!r} already present", flush=True)
            return
        http.post("/v1/collections", json={"name": name, "fields": catalog["fields"]}).raise_for_status()
        job = http.post(f"/v1/collections/{name}/documents", json={"documents": catalog["documents"],
                                                                   "batch_size": 8}).json()
        while True:
            state = http.get(f"/v1/jobs/{job['id']}").json()
            width = 30
            filled = int(width * state["done"] / max(1, state["total"]))
            print(f"\ringesting {name}: [{'#' * filled}{'.' * (width - filled)}] {state['done']}/{state['total']}",
                  end="", flush=True)
            if state["state"] in ("succeeded", "failed"):
                print(f"  {state['state']}", flush=True)
                return
            time.sleep(0.2)


def example_search(gateway: str) -> None:
    """One Korean search through the REST contract."""
    import httpx

    body = {"collection": "demo", "query": "부모님께 드릴 선물 추천", "top_k": 3}
    out = httpx.post(f"{gateway}/v1/search", json=body, timeout=10).json()
    print(f"\nPOST /v1/search {json.dumps(body, ensure_ascii=False)}")
    print(f"mode={out['mode']} degraded={out['degraded']} total={out['timings']['total_ms']:.1f} ms")
    for hit in out["hits"]:
        print(f"  {hit['score']:.3f}  {hit['id']}  {hit['text']}")


def example(port: int) -> None:
    """One Korean query and two passages through the typed client."""
    from clients import EmbeddingClient

    passages = ["빗소리를 들으며 읽기 좋은 장편소설 모음", "휴대용 블루투스 스피커 방수 기능"]
    with EmbeddingClient(f"127.0.0.1:{port}") as client:
        info = client.info()
        query = client.embed(["비 오는 날 읽기 좋은 소설"], "query")
        docs = client.embed(passages, "passage")
    scores = docs.vectors @ query.vectors[0]
    print(f"\nmodel {info.model_id} rev {info.revision} ({info.engine}, {info.precision}), dim {info.dim}")
    print(f"query embedded in {query.timings.total_ns / 1e6:.1f} ms inside the service")
    for text, score in zip(passages, scores, strict=True):
        print(f"  cos={float(score):.3f}  {text}")
    print(f"\nembedding service on 127.0.0.1:{port} (gRPC; reflection on). Ctrl-C stops the mesh.\n", flush=True)


def example_ocr(gateway: str) -> None:
    """A rendered Korean receipt read through the OCR job endpoints (submit, poll, result)."""
    import base64
    import io

    import httpx
    from PIL import Image, ImageDraw, ImageFont

    lines = ["하루커피 역삼점", "아메리카노  4,500원", "치즈케이크  6,500원", "합계  11,000원"]
    font = ImageFont.truetype("/usr/share/fonts/truetype/nanum/NanumGothic.ttf", 30)
    img = Image.new("RGB", (420, 60 + 48 * len(lines)), "white")
    for i, line in enumerate(lines):
        ImageDraw.Draw(img).text((30, 30 + 48 * i), line, font=font, fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    with httpx.Client(base_url=gateway, timeout=30) as http:
        job = http.post("/v1/ocr/jobs", json={"documents": [
            {"content_base64": base64.b64encode(buf.getvalue()).decode()}]}).json()
        while job["state"] not in ("succeeded", "failed"):
            time.sleep(0.2)
            job = http.get(f"/v1/ocr/jobs/{job['id']}").json()
    print(f"\nPOST /v1/ocr/jobs (a rendered receipt) -> {job['state']}")
    for page in (job.get("result") or {}).get("pages", []):
        print(f"  engine={page['engine']} confidence={page['mean_confidence']:.0f} {page['ms']:.0f} ms")
        for line in page["text"].splitlines():
            print(f"    {line}")


def example_recommendation(gateway: str) -> None:
    """A search whose cards get reasons from the local LLM in one call (streamed as SSE)."""
    import httpx

    body = {"collection": "demo", "query": "비 오는 날 읽기 좋은 책", "top_k": 3}
    print(f"\nPOST /v1/recommendations:stream {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)",
          flush=True)
    start = time.perf_counter()
    with httpx.stream("POST", f"{gateway}/v1/recommendations:stream", json=body, timeout=240) as resp:
        event = ""
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                took = time.perf_counter() - start
                if event == "cards":
                    print(f"  [{took:5.1f}s] cards: " + ", ".join(c["id"] for c in data["cards"]), flush=True)
                elif event == "reasons":
                    for r in data["reasons"]:
                        print(f"  [{took:5.1f}s] {r['id']}: {r['short']}", flush=True)
                elif event == "error":
                    print(f"  [{took:5.1f}s] reasons failed: {data['error']['message']}", flush=True)
                elif event == "done" and data.get("usage"):
                    u = data["usage"]
                    print(f"  [{took:5.1f}s] done: {u['llm_calls']} LLM call, TTFT {u['ttft_ms'] / 1e3:.1f}s, "
                          f"{u['completion_tokens']} tokens", flush=True)


def main() -> None:
    """Start, show, serve until interrupted, stop everything."""
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        redis, redis_url = start_redis(ROOT / ".data" / "redis", REDIS_PORT)
        procs.append(redis)
        print(f"[redis] {redis_url}", flush=True)
        print(f"[llm] starting the LLM server on {LLM_PORT} (loads ~1.1 GB)", flush=True)
        llm = start_llm_server(LLM_PORT, log_path=ROOT / ".data" / "llm.log")
        procs.append(llm.process)
        ports = {}
        for name, args in SERVICES:
            if name in ("ocr", "gateway"):
                args = [*args, "--redis-url", redis_url]
            if name == "reasoning":
                args = [*args, "--backend-url", llm.base_url]
            if name == "gateway":
                args = [*args, *GATEWAY_LLM_FLAGS]
            proc, port = start(name, args)
            procs.append(proc)
            ports[name] = port
        example(ports["embedding"])
        gateway = f"http://127.0.0.1:{ports['gateway']}"
        ensure_catalog(gateway)
        example_search(gateway)
        example_ocr(gateway)
        example_recommendation(gateway)
        print(f"\ngateway on {gateway} (OpenAPI at {gateway}/docs). Ctrl-C stops the mesh.\n", flush=True)
        while not stop.is_set() and all(p.poll() is None for p in procs):
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                if p in procs[:2]:  # redis and the LLM server: our own children, not session leaders
                    p.terminate()
                else:
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        print("mesh stopped", flush=True)


if __name__ == "__main__":
    main()
