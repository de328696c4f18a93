"""Run the mesh on embedded defaults: every service as a process, an example call, then serve.

Ctrl-C (or SIGTERM) stops every process it started, whatever it was doing. Its fixed ports are
checked before anything starts: a taken one is one line naming it and its holder (exit 2).

Processes: Redis (shared cache and OCR job state, no persistence), the local LLM server (llama.cpp,
Qwen2.5-Coder-1.5B Q4) on 8081, embedding (ONNX Runtime int8) on 50051, retrieval (Qdrant Edge,
Korean BM25 + dense hybrid) on 50052, reasoning on 50053, OCR (Tesseract kor+eng) on 50054, and the
gateway (REST) on 8080. Services expose Prometheus metrics on 9101-9104 (the gateway on its own
``/metrics``). Each process logs to ``.data/logs/<name>.log``; the console shows the runner's own lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from infra.llm.server import start_llm_server
from services.runtime.processes import (
    port_holders,
    require_free_port,
    run_children,
    start_process,
    start_redis,
)

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / ".data" / "logs"
# name, module, gRPC/HTTP port, Prometheus port (None: the gateway serves /metrics itself)
SERVICES = [
    ("embedding", "services.embedding", 50051, 9101),
    ("retrieval", "services.retrieval", 50052, 9102),  # embedded Qdrant Edge in .data/qdrant
    ("reasoning", "services.reasoning", 50053, 9103),  # streams from the local LLM server
    ("ocr", "services.ocr", 50054, 9104),  # Tesseract kor+eng; jobs in Redis
    ("gateway", "gateway", 8080, None),  # REST
]
REDIS_PORT = 0  # a free port: each run has its own, unpersisted Redis
LLM_PORT = 8081
OTLP_PORT = 4317  # OTLP/gRPC of the trace UI that `make ops` runs
# A 1.5B model on two CPU cores writes ~10-27 tokens/s and a reasons call with a regeneration takes
# up to a minute (bench/results/reasoning.md); the gateway's LLM deadlines are raised for the demo.
GATEWAY_LLM_FLAGS = ["--reasoning-first-token-s", "60", "--reasoning-generation-s", "120",
                     "--reasoning-total-s", "180", "--reasoning-timeout-ms", "200000"]
SAMPLE = ROOT / "gateway" / "sample_catalog.json"


def start(name: str, module: str, args: list[str]) -> tuple[subprocess.Popen[str], int]:
    """Start one service (own session, so Ctrl-C reaches only us); its output goes to its log file."""
    log = (LOGS / f"{name}.log").open("a", encoding="utf-8")

    def write(line: str) -> None:
        log.write(line)
        log.flush()

    print(f"[mesh] starting {name}", flush=True)
    return start_process(module, *args, echo=write)


def ensure_catalog(gateway: str) -> None:
    """Create and ingest the bundled Korean sample catalog when it is not there yet (with progress).

    A catalog left by an older version (built with another analyser or embedding revision, which
    retrieval refuses to mix) is reindexed first.
    """
    import httpx

    catalog = json.loads(SAMPLE.read_text())
    name = catalog["collection"]
    with httpx.Client(base_url=gateway, headers=auth(), timeout=30) as http:
        if http.get(f"/v1/collections/{name}").status_code == 200:
            probe = http.post("/v1/search", json={"collection": name, "query": "선물", "mode": "keyword"})
            if probe.status_code != 409:
                print(f"catalog {name!r} already present", flush=True)
                return
            print(f"catalog {name!r} was built by an older version: reindexing", flush=True)
            _follow(http, http.post(f"/v1/collections/{name}/reindex").json(), f"reindexing {name}")
            return
        http.post("/v1/collections", json={"name": name, "fields": catalog["fields"]}).raise_for_status()
        job = http.post(f"/v1/collections/{name}/documents", json={"documents": catalog["documents"],
                                                                   "batch_size": 8}).json()
        _follow(http, job, f"ingesting {name}")


def _follow(http, job: dict, desc: str, timeout_s: float = 600) -> None:
    """A job's progress as a bar until it ends."""
    from tqdm import tqdm

    deadline = time.monotonic() + timeout_s
    with tqdm(total=job.get("total") or None, desc=desc, unit="doc") as bar:
        while time.monotonic() < deadline:
            state = http.get(f"/v1/jobs/{job['id']}").json()
            bar.total = state["total"] or bar.total
            bar.update(state["done"] - bar.n)
            if state["state"] in ("succeeded", "failed"):
                bar.set_postfix_str(state["state"])
                return
            time.sleep(0.2)
    raise TimeoutError(f"the job {job['id']} did not finish in {timeout_s:.0f} s")


def example_search(gateway: str) -> None:
    """One Korean search through the REST contract."""
    import httpx

    body = {"collection": "demo", "query": "부모님께 드릴 선물 추천", "top_k": 3}
    out = httpx.post(f"{gateway}/v1/search", json=body, headers=auth(), timeout=10).json()
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
    with httpx.Client(base_url=gateway, headers=auth(), timeout=30) as http:
        job = http.post("/v1/ocr/jobs", json={"documents": [
            {"content_base64": base64.b64encode(buf.getvalue()).decode()}]}).json()
        deadline = time.monotonic() + 120
        while job["state"] not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the OCR job {job['id']} did not finish in 120 s")
            time.sleep(0.2)
            job = http.get(f"/v1/ocr/jobs/{job['id']}").json()
    print(f"\nPOST /v1/ocr/jobs (a rendered receipt) -> {job['state']}")
    for page in (job.get("result") or {}).get("pages", []):
        print(f"  engine={page['engine']} confidence={page['mean_confidence']:.0f} {page['ms']:.0f} ms")
        for line in page["text"].splitlines():
            print(f"    {line}")


def example_recommendation(gateway: str) -> None:
    """A search whose cards get reasons from the local LLM, one call a card, each card streamed as SSE."""
    import httpx

    body = {"collection": "demo", "query": "비 오는 날 읽기 좋은 책", "top_k": 3}
    print(f"\nPOST /v1/recommendations:stream {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)",
          flush=True)
    start = time.perf_counter()
    with httpx.stream("POST", f"{gateway}/v1/recommendations:stream", json=body, headers=auth(), timeout=240) as resp:
        event = ""
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                took = time.perf_counter() - start
                if event == "cards":
                    print(f"  [{took:5.1f}s] cards: " + ", ".join(c["id"] for c in data["cards"]), flush=True)
                elif event == "reason":  # one card, the moment its reason is written and checked
                    text = data["short"] or f"(no reason: {', '.join(data['violations'])})"
                    who = f"{data['status']}, {data.get('source') or 'model'}" if data["status"] == "failed" \
                        else data["status"]
                    print(f"  [{took:5.1f}s] {data['id']} {who}: {text}", flush=True)
                elif event == "error":
                    print(f"  [{took:5.1f}s] reasons failed: {data['error']['message']}", flush=True)
                elif event == "done" and data.get("usage"):
                    u = data["usage"]
                    print(f"  [{took:5.1f}s] done: {u['llm_calls']} LLM calls, first token "
                          f"{u['ttft_ms'] / 1e3:.1f}s, {u['completion_tokens']} tokens", flush=True)


def example_answers(gateway: str) -> None:
    """Two grounded answers from the catalog: one the documents hold, one they do not (refused, not guessed)."""
    import httpx

    for question in ("텀블러는 몇 시간 동안 보온이 되나요?", "대한민국의 수도는 어디인가요?"):
        body = {"collection": "demo", "question": question, "top_k": 3}
        print(f"\nPOST /v1/answers {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)", flush=True)
        start = time.perf_counter()
        out = httpx.post(f"{gateway}/v1/answers", json=body, headers=auth(), timeout=240).json()
        took = time.perf_counter() - start
        if out.get("answerable"):
            cited = ", ".join(f"{c['id']} \"{c['text']}\"" for c in out["citations"])
            print(f"  [{took:5.1f}s] {out['answer']}\n          evidence: {cited}", flush=True)
        else:
            check = (out.get("support") or {}).get("check")
            print(f"  [{took:5.1f}s] not answered: {out.get('reason') or out.get('error')}"
                  + (f" ({check})" if check else ""), flush=True)


def example_task(gateway: str) -> None:
    """A declared task: a Korean interview notice read into a calendar entry (the model proposes, code reads dates)."""
    import httpx

    body = {"input": {"text": "[카카오] 1차 기술 면접: 다음 주 화요일 오후 3시, 판교 오피스",
                      "reference_date": time.strftime("%Y-%m-%d")}}
    print(f"\nPOST /v1/tasks/calendar_parse {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)", flush=True)
    start = time.perf_counter()
    out = httpx.post(f"{gateway}/v1/tasks/calendar_parse", json=body, headers=auth(), timeout=240).json()
    r = out.get("result") or {}
    print(f"  [{time.perf_counter() - start:5.1f}s] {r.get('company')} / {r.get('stage')} / {r.get('start')}"
          if r else f"  failed: {out.get('error', out)}", flush=True)


def example_conversation(gateway: str) -> None:
    """A gift conversation: a turn (the profile code keeps, the filtered search), the confirm screen, both lists."""
    import httpx

    start_body = {"collection": "demo", "categories": ["도서", "생활", "선물", "전자기기", "커리어"],
                  "attributes": []}
    cid = httpx.post(f"{gateway}/v1/conversations", json=start_body, headers=auth(), timeout=30).json()["id"]
    body = {"text": "부모님 결혼기념일 선물 5만 원 이하로 찾아요, 도서는 빼고요", "top_k": 3}
    print(f"\nPOST /v1/conversations/{{id}}/turns {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)", flush=True)
    start = time.perf_counter()
    out = httpx.post(f"{gateway}/v1/conversations/{cid}/turns", json=body, headers=auth(), timeout=240).json()
    if "profile" not in out:
        print(f"  failed: {out.get('error', out)}", flush=True)
        return
    p = out["profile"]
    print(f"  [{time.perf_counter() - start:5.1f}s] recipient={p.get('recipient')} occasion={p.get('occasion')} "
          f"budget_max={p.get('budget_max')} excluded={p.get('excluded_categories')}", flush=True)
    print(f"          filter: {json.dumps(out['search'].get('filter'), ensure_ascii=False)}; hits: "
          + ", ".join(h["id"] for h in out["hits"]), flush=True)
    print("\nPOST /v1/conversations/{id}:confirm  (keywords by code, a summary within 5 s or null)", flush=True)
    start = time.perf_counter()
    done = httpx.post(f"{gateway}/v1/conversations/{cid}:confirm", headers=auth(), timeout=60).json()
    print(f"  [{time.perf_counter() - start:5.1f}s] keywords={done.get('keywords')} summary={done.get('summary')!r}"
          + (f" ({done.get('summary_error')})" if done.get("summary_error") else ""), flush=True)
    print("\nPOST /v1/conversations/{id}/lists {\"top_k\": 3}  (a job: queries, one embedding call, search, reasons)",
          flush=True)
    start = time.perf_counter()
    job = httpx.post(f"{gateway}/v1/conversations/{cid}/lists", json={"top_k": 3}, headers=auth(), timeout=30).json()
    while job.get("state") in ("queued", "running") and time.perf_counter() - start < 240:
        time.sleep(0.5)
        job = httpx.get(f"{gateway}/v1/conversations/{cid}/lists/{job['id']}", headers=auth(), timeout=30).json()
    result = job.get("result") or {}
    for name in ("gift", "self"):
        print(f"  [{time.perf_counter() - start:5.1f}s] {name}: " + "; ".join(
            f"{i['id']} ({i.get('reason') or 'no reason'})" for i in result.get(name, [])), flush=True)
    if result.get("timings"):
        print(f"          stages: {result['timings']}", flush=True)


def example_assistant(gateway: str) -> None:
    """An assistant session's turn: the question searched, the answer checked and cited (SSE events)."""
    import httpx

    sid = httpx.post(f"{gateway}/v1/assistant/sessions", json={"collections": ["demo"], "caller": "demo"},
                     headers=auth(), timeout=30).json()["id"]
    body = {"text": "텀블러는 몇 시간 동안 보온이 돼?"}
    print(f"\nPOST /v1/assistant/sessions/{{id}}/messages {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)",
          flush=True)
    start = time.perf_counter()
    with httpx.stream("POST", f"{gateway}/v1/assistant/sessions/{sid}/messages", json=body, headers=auth(),
                      timeout=240) as resp:
        event = ""
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event != "delta":
                data = json.loads(line[6:])
                if event == "answer":
                    data = {**data, "citations": [c["id"] for c in data["citations"]]}
                elif event == "done":
                    data = {"turn": data["turn"], "timings": data["timings"]}
                print(f"  [{time.perf_counter() - start:5.1f}s] {event}: {json.dumps(data, ensure_ascii=False)[:200]}",
                      flush=True)
            elif line.startswith("data: "):
                print(f"  [{time.perf_counter() - start:5.1f}s] delta: {json.loads(line[6:])['text']}", flush=True)


def example_files(gateway: str) -> None:
    """A two-page PDF (made here, with a text layer) stored in the catalog, then a grounded answer citing its page."""
    import httpx

    from bench.file_set import reportlab_pdf

    pages = [["한빛소프트웨어 회사 소개", "한빛소프트웨어는 판교에 있는 결제 솔루션 회사입니다.",
              "직원은 120명입니다."],
             ["한빛소프트웨어 복지 안내", "재택근무는 주 2일까지 가능합니다.",
              "도서 구입비는 연 60만 원을 지원합니다."]]
    pdf = reportlab_pdf(pages, "NanumGothic.ttf")
    print("\nPOST /v1/collections/demo/files (multipart: company.pdf, 2 pages)", flush=True)
    start = time.perf_counter()
    with httpx.Client(base_url=gateway, headers=auth(), timeout=60) as http:
        job = http.post("/v1/collections/demo/files", files={"file": ("company.pdf", pdf, "application/pdf")}).json()
        while job.get("state") not in ("succeeded", "failed", None):
            time.sleep(0.1)
            job = http.get(f"/v1/jobs/{job['id']}").json()
        result = job.get("result") or {}
        again = " (unchanged: stored before)" if result.get("unchanged") else ""
        print(f"  [{time.perf_counter() - start:5.1f}s] {job.get('state')}: {result.get('id')} "
              f"{result.get('pages', '')} pages {result.get('sources') or ''}{again}", flush=True)
        body = {"collection": "demo", "question": "한빛소프트웨어 재택근무는 주 며칠까지 돼?", "top_k": 3}
        print(f"POST /v1/answers {json.dumps(body, ensure_ascii=False)}  (local LLM, CPU)", flush=True)
        out = http.post("/v1/answers", json=body, timeout=240).json()
        cited = ", ".join(f"{c['id']} page {c.get('page')}: \"{c['text']}\"" for c in out.get("citations", []))
        print(f"  [{time.perf_counter() - start:5.1f}s] {out.get('answer') or out.get('reason')}\n"
              f"          evidence: {cited or '-'}", flush=True)


def example_pii(gateway: str) -> None:
    """Personal data found in Korean text and masked (code only, no model)."""
    import httpx

    body = {"text": "성명: 홍길동\n휴대폰: 010-1234-5678\n이메일: gildong@example.com", "mask": True}
    print(f"\nPOST /v1/pii:detect {json.dumps(body, ensure_ascii=False)}", flush=True)
    out = httpx.post(f"{gateway}/v1/pii:detect", json=body, headers=auth(), timeout=30).json()
    kinds = ", ".join(s["kind"] for s in out.get("spans", []))
    print(f"  found: {kinds}\n  masked: {out.get('masked_text', '')!r}", flush=True)


EXAMPLES = (("search", example_search), ("OCR", example_ocr), ("recommendation", example_recommendation),
            ("grounded answers", example_answers), ("declared task", example_task),
            ("conversation", example_conversation), ("assistant", example_assistant), ("files", example_files),
            ("personal data", example_pii))


def auth() -> dict[str, str]:
    """The key the demo sends: MESH_DEMO_API_KEY, else the first of MESH_GATEWAY_API_KEYS (none: keys off)."""
    first = os.environ.get("MESH_DEMO_API_KEY") or os.environ.get("MESH_GATEWAY_API_KEYS", "").split(",")[0].strip()
    return {"X-API-Key": first} if first else {}


def run_demo(gateway: str) -> None:
    """Every feature once against a running mesh (`make demo`: the gateway of `make run` on 8080)."""
    demo("sample catalog", ensure_catalog, gateway)
    for name, step in EXAMPLES:
        demo(name, step, gateway)


def demo(name: str, step, *args) -> None:
    """Run one example; a failure is one line and the mesh keeps serving."""
    try:
        step(*args)
    except Exception as exc:  # noqa: BLE001 - an example is not the mesh: report it and go on
        print(f"\n[mesh] the {name} example failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
              "the mesh keeps serving", flush=True)


def check_ports() -> None:
    """Every fixed port must be free before anything starts (one line naming a taken one)."""
    require_free_port(LLM_PORT, "LLM server")
    for name, _module, port, metrics_port in SERVICES:
        require_free_port(port, name)
        if metrics_port is not None:
            require_free_port(metrics_port, f"{name} metrics")


def trace_export() -> None:
    """Send every process's spans to the local trace UI (``make ops``: Phoenix on 4317), whenever it runs.

    The exporters keep trying with every batch, so ``make ops`` may start before or after this.
    """
    if os.environ.get("OTEL_TRACES_EXPORTER"):
        print(f"[mesh] traces: OTEL_TRACES_EXPORTER={os.environ['OTEL_TRACES_EXPORTER']} (from the environment)",
              flush=True)
        return
    os.environ.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                       "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{OTLP_PORT}"})
    up = "it listens" if port_holders(OTLP_PORT) else "not up yet: `make ops` starts it, the mesh keeps trying"
    print(f"[mesh] traces: OTLP to 127.0.0.1:{OTLP_PORT}, the trace UI of `make ops` ({up})", flush=True)


def start_mesh(procs: list[subprocess.Popen]) -> dict[str, int]:
    """Redis, the LLM server, then every service; ``procs`` collects each process as soon as it runs."""
    LOGS.mkdir(parents=True, exist_ok=True)
    trace_export()
    redis, redis_url = start_redis(ROOT / ".data" / "redis", REDIS_PORT)
    procs.append(redis)
    print(f"[mesh] redis on {redis_url}", flush=True)
    print(f"[mesh] starting the LLM server on {LLM_PORT} (loads ~1.1 GB)", flush=True)
    llm = start_llm_server(LLM_PORT, log_path=LOGS / "llm.log")
    procs.append(llm.process)
    ports = {}
    for name, module, port, metrics_port in SERVICES:
        args = ["--port", str(port)]
        if metrics_port is not None:
            args += ["--metrics-port", str(metrics_port)]
        if name in ("ocr", "gateway"):
            args += ["--redis-url", redis_url]
        if name == "reasoning":
            args += ["--backend-url", llm.base_url]
        if name == "gateway":  # a local demo: keys only when MESH_GATEWAY_API_KEYS is set (the notice says so)
            args += [*GATEWAY_LLM_FLAGS, "--allow-no-auth"]
        proc, ports[name] = start(name, module, args)
        procs.append(proc)
    return ports


def main() -> None:
    """Start, show, serve until interrupted, stop everything (also on SIGTERM and on a failed start).

    ``--demo-only``: only the examples, against the gateway of a mesh already running (``make demo``).
    """
    import sys

    if "--demo-only" in sys.argv[1:]:
        run_demo(f"http://127.0.0.1:{next(port for name, _, port, _ in SERVICES if name == 'gateway')}")
        return
    procs: list[subprocess.Popen] = []

    def start() -> None:
        check_ports()
        ports = start_mesh(procs)
        gateway = f"http://127.0.0.1:{ports['gateway']}"
        demo("embedding", example, ports["embedding"])
        run_demo(gateway)
        metrics = ", ".join(f"{name} http://127.0.0.1:{m}/metrics" for name, _, _, m in SERVICES if m)
        keys = "on" if os.environ.get("MESH_GATEWAY_API_KEYS") or os.environ.get("MESH_GATEWAY_API_KEYS_FILE") \
            else "off (local demo; set MESH_GATEWAY_API_KEYS or MESH_GATEWAY_API_KEYS_FILE)"
        print(f"\ngateway on {gateway} (OpenAPI at {gateway}/docs, metrics at {gateway}/metrics), API keys {keys}\n"
              f"service metrics: {metrics}\nlogs in {LOGS.relative_to(ROOT)}/. Ctrl-C stops the mesh.\n",
              flush=True)

    run_children("[mesh]", procs, start, stopped="mesh stopped")

if __name__ == "__main__":
    main()
