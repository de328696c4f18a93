"""Operations, proven on the mesh as processes: one trace per request, JSON logs, metrics, a real Prometheus.

Every process exports spans over OTLP/HTTP (the standard OTEL_* variables) to a local receiver
(bench/standin.py ``OtlpSink``, which decodes real OTLP requests); a real Prometheus (Debian's
package) scrapes every process with the committed alert rules loaded; the committed Grafana
dashboards' queries are asked of it. The reasoning process talks to the scripted stand-in LLM.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
import yaml
from PIL import Image, ImageDraw, ImageFont

from bench.standin import ChatStandIn, OtlpSink
from services.runtime.processes import start_process, start_redis, stop_process
from support import eventually, free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
OBS = ROOT / "infra" / "observability"
QUERY = "관측성 시험용 캠핑 의자 질문"  # must never appear in a log line or a span attribute
DOCS = [{"id": "p1", "text": "제주도 올레길 여행 가이드북"}, {"id": "p2", "text": "무선 노이즈 캔슬링 이어폰"},
        {"id": "p3", "text": "캠핑용 접이식 의자와 테이블"}]


def wait_for(check, timeout_s: float = 30.0, every_s: float = 0.2):
    """Poll ``check`` until it returns something truthy; fail on the deadline (the systems here have no push)."""
    return eventually(check, bool, timeout_s=timeout_s, every_s=every_s)


def receipt_png(blank: bool = False) -> str:
    """A rendered Korean receipt (or a blank page, which Tesseract fails on) as base64 PNG."""
    img = Image.new("RGB", (420, 160), "white")
    if not blank:
        font = ImageFont.truetype("/usr/share/fonts/truetype/nanum/NanumGothic.ttf", 28)
        ImageDraw.Draw(img).text((20, 40), "아메리카노 4,500원", font=font, fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("obs")
    sink = OtlpSink()
    standin = ChatStandIn([{"chunks": ["네", ", ", "알겠습니다"]}])
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    logs: dict[str, list[str]] = defaultdict(list)
    procs: dict[str, subprocess.Popen] = {}
    metrics: dict[str, int] = {}

    def start(name: str, module: str, *args: str) -> int:
        metrics[name] = free_port()
        extra = [] if name == "gateway" else ["--metrics-port", str(metrics[name])]
        procs[name], port = start_process(module, "--port", "0", *extra, *args, env=env,
                                          echo=lambda line: logs[name].append(line))
        if name == "gateway":
            metrics[name] = port
        return port

    redis, redis_url = start_redis(tmp / "redis")
    try:
        emb = start("embedding", "services.embedding", "--intra-op-threads", "1")
        ret = start("retrieval", "services.retrieval", "--qdrant-location", str(tmp / "q"),
                    "--embedding-target", f"127.0.0.1:{emb}")
        ocr = start("ocr", "services.ocr", "--engines", "1", "--redis-url", redis_url.replace("/0", "/1"))
        rsn = start("reasoning", "services.reasoning", "--backend-url", standin.url)
        gw = start("gateway", "gateway", "--embedding-target", f"127.0.0.1:{emb}", "--retrieval-target",
                   f"127.0.0.1:{ret}", "--redis-url", redis_url, "--ocr-target", f"127.0.0.1:{ocr}",
                   "--reasoning-targets", f"127.0.0.1:{rsn}", "--breaker-failures", "2", "--breaker-reset-s", "30",
                   "--default-timeout-ms", "5000")
        base = f"http://127.0.0.1:{gw}"
        with httpx.Client(base_url=base, timeout=60) as http:
            assert http.post("/v1/collections", json={"name": "shop"}).status_code == 201
            job = http.post("/v1/collections/shop/documents", json={"documents": DOCS}).json()
            wait_for(lambda: http.get(f"/v1/jobs/{job['id']}").json()["state"] == "succeeded")
        yield {"base": base, "sink": sink, "logs": logs, "procs": procs, "metrics": metrics, "tmp": tmp}
    finally:
        for proc in procs.values():
            stop_process(proc)
        stop_process(redis)
        standin.close()
        sink.close()


def test_one_search_is_one_trace_across_three_services_with_a_correct_parent_chain(observed):
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    request_id = "req-" + secrets.token_hex(6)
    with httpx.Client(base_url=observed["base"], timeout=30) as http:
        r = http.post("/v1/search", json={"collection": "shop", "query": QUERY},
                      headers={"traceparent": f"00-{trace_id}-{parent_id}-01", "X-Request-ID": request_id})
    assert r.status_code == 200 and r.headers["x-request-id"] == request_id
    sink = observed["sink"]

    def complete():
        spans = sink.trace(trace_id)
        names = {s["name"] for s in spans}
        done = {"retrieval.search", "/mesh.embedding.v1.EmbeddingService/Embed",
                "/mesh.retrieval.v1.RetrievalService/Search"} <= names and any(
            s["service"] == "mesh-gateway" and s["parent_id"] == parent_id for s in spans)
        return spans if done else None

    spans = wait_for(complete, 30)
    # Late children of the same request (batch processors flush every 200 ms): read until two reads
    # ~0.45 s apart find the same number of spans.
    seen = {"n": len(spans)}

    def settled():
        time.sleep(0.25)
        now = sink.trace(trace_id)
        stable, seen["n"] = len(now) == seen["n"], len(now)
        return now if stable else None

    spans = wait_for(settled, 30)
    by_id = {s["span_id"]: s for s in spans}
    assert {s["service"] for s in spans} >= {"mesh-gateway", "mesh-embedding", "mesh-retrieval"}
    roots = [s for s in spans if s["parent_id"] == parent_id]
    assert len(roots) == 1 and roots[0]["service"] == "mesh-gateway", roots
    orphans = [s for s in spans if s["parent_id"] != parent_id and s["parent_id"] not in by_id]
    assert not orphans, orphans

    def ancestors(span):
        chain = []
        while span["parent_id"] in by_id:
            span = by_id[span["parent_id"]]
            chain.append((span["service"], span["name"]))
        return chain

    def server(name):
        return next(s for s in spans if s["name"] == name and s["kind"] == 2)  # SPAN_KIND_SERVER

    embed, search = server("/mesh.embedding.v1.EmbeddingService/Embed"), server(
        "/mesh.retrieval.v1.RetrievalService/Search")
    assert ("mesh-gateway", "gateway.query_vector") in ancestors(embed)
    assert ancestors(embed)[-1][0] == "mesh-gateway" and ancestors(search)[-1][0] == "mesh-gateway"
    stages = {s["name"]: s for s in spans if s["service"] == "mesh-retrieval"}
    assert stages["retrieval.search"]["parent_id"] == search["span_id"]
    assert stages["retrieval.legs_and_fusion"]["parent_id"] == stages["retrieval.search"]["span_id"]
    attrs = stages["retrieval.search"]["attributes"]
    assert attrs["mesh.collection"] == "shop" and attrs["mesh.mode"] == "hybrid" and attrs["mesh.hits"] >= 1
    gateway_attrs = roots[0]["attributes"]
    assert gateway_attrs["mesh.request_id"] == request_id and gateway_attrs["mesh.cache_hit"] is False
    assert "mesh.hits" in gateway_attrs and gateway_attrs["mesh.collection"] == "shop"
    leaked = [(s["name"], k) for s in spans for k, v in s["attributes"].items() if isinstance(v, str) and (
        QUERY in v or "캠핑 의자" in v)]
    assert not leaked, leaked


def test_chat_and_ocr_jobs_are_traced_with_llm_figures_and_links(observed):
    sink = observed["sink"]
    chat_trace, ocr_trace = secrets.token_hex(16), secrets.token_hex(16)
    with httpx.Client(base_url=observed["base"], timeout=60) as http:
        with http.stream("POST", "/v1/chat", json={"session_id": "t1", "message": QUERY},
                         headers={"traceparent": f"00-{chat_trace}-{secrets.token_hex(8)}-01"}) as resp:
            assert "event: done" in resp.read().decode()
        job = http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": receipt_png()}]},
                        headers={"traceparent": f"00-{ocr_trace}-{secrets.token_hex(8)}-01"}).json()
        wait_for(lambda: http.get(f"/v1/ocr/jobs/{job['id']}").json()["state"] == "succeeded", 60)

    def chat_spans():
        spans = sink.trace(chat_trace)
        llm = [s for s in spans if s["service"] == "mesh-reasoning" and s["kind"] == 3]  # the HTTP call to the LLM
        return spans if llm and any(s["name"].endswith("ReasoningService/Chat") and s["kind"] == 2
                                    for s in spans) else None

    spans = wait_for(chat_spans, 30)
    by_id = {s["span_id"]: s for s in spans}
    server = next(s for s in spans if s["name"].endswith("ReasoningService/Chat") and s["kind"] == 2)
    assert server["attributes"]["mesh.llm.tokens_out"] == 3 and server["attributes"]["mesh.llm.ttft_ms"] >= 0
    llm_call = next(s for s in spans if s["service"] == "mesh-reasoning" and s["kind"] == 3)
    assert by_id[llm_call["parent_id"]]["span_id"] == server["span_id"]
    assert {s["service"] for s in spans} >= {"mesh-gateway", "mesh-reasoning"}
    job_span = wait_for(lambda: next((s for s in sink.spans if s["name"] == "ocr.job" and ocr_trace in s["links"]),
                                     None), 30)
    pages = [s for s in sink.trace(job_span["trace_id"]) if s["name"] == "ocr.page"]
    assert pages and pages[0]["attributes"]["mesh.ocr.engine"] == "tesseract"
    line = wait_for(lambda: next((json.loads(ln) for ln in observed["logs"]["gateway"]
                                  if chat_trace in ln and '"route"' in ln), None), 10)
    assert line["route"] == "/v1/chat" and line["tokens_out"] == 3 and "ttft_ms" in line


def test_logs_are_json_lines_with_request_and_trace_ids_and_no_user_text(observed):
    request_id = "req-" + secrets.token_hex(6)
    with httpx.Client(base_url=observed["base"], timeout=30) as http:
        r = http.post("/v1/search", json={"collection": "shop", "query": QUERY + " 두번째"},
                      headers={"X-Request-ID": request_id})
        assert r.status_code == 200
        generated = http.get("/healthz").headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", generated)  # made when not given

    def access_line():
        for line in observed["logs"]["gateway"]:
            if request_id in line and '"route"' in line:
                return json.loads(line)
        return None

    entry = wait_for(access_line, 10)
    assert entry["route"] == "/v1/search" and entry["status"] == 200 and entry["level"] == "INFO"
    assert entry["service"] == "mesh-gateway" and re.fullmatch(r"[0-9a-f]{32}", entry["trace_id"])
    assert {"timestamp", "latency_ms", "embed_ms", "retrieval_ms", "cache_hit", "degraded", "hits"} <= set(entry)
    user_text = [QUERY, "캠핑 의자", *(d["text"] for d in DOCS)]
    for name, lines in observed["logs"].items():
        assert lines, name
        for line in lines:
            if line.startswith(("SERVING port=", "READY-PENDING port=")):
                continue  # the start-up handshake on stdout (services/runtime/processes.py reads it)
            record = json.loads(line)  # anything else must be one JSON object
            assert {"timestamp", "level", "service", "logger", "message", "trace_id", "span_id",
                    "request_id"} <= set(record), (name, record)
            assert not [t for t in user_text if t in line], (name, line)


def test_every_process_exports_metrics_promtool_accepts(observed):
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: scripts/setup.sh installs Debian's prometheus package"
    for name, port in observed["metrics"].items():
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (name, out.stdout[-3000:], out.stderr[-3000:])
        assert "mesh_process_memory_limit_bytes" in text, name
    text = httpx.get(f"http://127.0.0.1:{observed['metrics']['embedding']}/metrics", timeout=10).text
    assert 'mesh_grpc_server_started_total{method="/mesh.embedding.v1.EmbeddingService/EmbedStream"' in text
    assert "mesh_embedding_queue_depth" in text


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every committed dashboard, Grafana's interval variables made concrete."""
    out = []

    def walk(board: str, panels: list) -> None:
        for panel in panels:
            walk(board, panel.get("panels") or [])
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    expr = target["expr"].replace("$__rate_interval", "30s").replace("$__interval", "30s")
                    out.append((f"{board}: {panel.get('title')}", expr))

    for path in sorted((OBS / "dashboards").glob("*.json")):
        walk(path.name, json.loads(path.read_text())["panels"])
    return out


def test_dashboards_have_data_and_killing_embedding_fires_the_degraded_alert(observed, tmp_path):
    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus missing: scripts/setup.sh installs Debian's prometheus package"
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(OBS / "alerts.yml")],
              "scrape_configs": [{"job_name": name, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                                 for name, port in observed["metrics"].items()]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    prom = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{port}/-/ready") == 200, 60)

        def query(expr: str) -> list:
            body = httpx.get(f"{api}/query", params={"query": expr}, timeout=10).json()
            assert body["status"] == "success", (expr, body)
            return body["data"]["result"]

        def scraped_since(t0: float) -> None:
            """Wait until Prometheus scraped every live target twice after ``t0`` (1 s interval), not a fixed pause."""
            wait_for(lambda: query(f'min(timestamp(up == 1)) > {t0 + 1.0:.3f}'), 30, every_s=0.25)

        wait_for(lambda: query('count(up{job=~"gateway|embedding|retrieval|reasoning|ocr"} == 1) == 5'), 60)
        answered: set[str] = set()
        with httpx.Client(base_url=observed["base"], timeout=60) as http:
            for i in range(6):  # searches (cold and cached), embeddings, chat, reasons, OCR jobs
                assert http.post("/v1/search", json={"collection": "shop", "query": f"여행 가이드 {i % 3}"}
                                 ).status_code == 200
            assert http.post("/v1/embeddings", json={"model": "intfloat/multilingual-e5-small",
                                                     "input": ["문장 하나"]}).status_code == 200
            with http.stream("POST", "/v1/chat", json={"session_id": "s1", "message": "안녕하세요"}) as resp:
                assert "event: done" in resp.read().decode()
            http.post("/v1/recommendations", json={"collection": "shop", "query": "여행 선물", "top_k": 2})
            for blank in (False, True):
                job = http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": receipt_png(blank)}]}).json()
                wait_for(lambda job=job: http.get(f"/v1/ocr/jobs/{job['id']}").json()["state"] == "succeeded", 60)
            scraped_since(time.time())  # every rate() window holds the traffic above
            answered = {expr for _title, expr in dashboard_queries() if query(expr)}
            # Embedding goes away: searches degrade, the breaker opens, a collection cannot be created (503,
            # and retrieval answers UNAVAILABLE): the error and degradation panels need this phase.
            os.kill(observed["procs"]["embedding"].pid, signal.SIGKILL)
            observed["procs"]["embedding"].wait()
            for i in range(6):
                r = http.post("/v1/search", json={"collection": "shop", "query": f"이어폰 {i}"})
                assert r.status_code == 200 and r.json()["degraded"]
            assert http.post("/v1/collections", json={"name": "later"}).status_code == 503
        alert = wait_for(lambda: query('ALERTS{alertname="MeshSearchDegraded", alertstate=~"pending|firing"}'), 60)
        assert alert[0]["metric"]["job"] == "gateway"
        wait_for(lambda: query('ALERTS{alertname="MeshEmbeddingBreakerOpen"}'), 30)
        scraped_since(time.time())
        answered |= {expr for _title, expr in dashboard_queries() if query(expr)}
        empty = [(title, expr) for title, expr in dashboard_queries() if expr not in answered]
        assert not empty, empty
    finally:
        stop_process(prom)


def _get(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0
