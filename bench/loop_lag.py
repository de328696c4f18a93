"""The gateway's event-loop lag under the largest input each route accepts.

    python -m bench.loop_lag [--repeat 3] [--out bench/results/loop_lag]

Starts the mesh as processes (bench.faults_mesh: Redis, embedding, retrieval, OCR, reasoning over the
scripted stand-in LLM, and the gateway with ``--loop-lag-probe-ms 2``), ingests long documents (20,000
characters each) for the answer route, then sends each route its largest accepted request ``--repeat``
times, one at a time, from this process (bodies encoded before the clock starts, so the client costs
the gateway nothing). Between routes it reads the gateway's ``mesh_gateway_event_loop_lag_seconds``
histogram (a timer due every 2 ms, how late it ran); the difference is that route's lag distribution,
including the background work it caused (an ingest job's batches). The worst lag is known to within
a bucket: reported as the bucket it fell in. Target (issue 40): no stall over 10 ms on any route.
Loopback only; fixed counts; everything stops by itself.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, md_table
from bench.faults_mesh import FaultMesh
from bench.report import command_line, write_result

METRIC = "mesh_gateway_event_loop_lag_seconds"
Then = Callable[[httpx.Client, httpx.Response], None]  # what follows a route's request (an ingest: its job)
LIMIT_S = 0.010
LONG_WORDS = ["연차", "휴가는", "입사", "1년", "후에", "15일이", "주어지며", "쓰지", "못한", "날은", "다음", "해로",
              "이월할", "수", "있습니다", "출장비는", "영수증과", "함께", "청구하고", "숙박비를", "지원합니다"]


def long_text(seed: int, chars: int = 20000) -> str:
    """Korean prose of ``chars`` characters, sentences of 6-14 words (deterministic)."""
    out: list[str] = []
    n, i = 0, seed
    while n < chars:
        words = [LONG_WORDS[(i * 7 + k * 3) % len(LONG_WORDS)] for k in range(6 + i % 9)]
        sentence = " ".join(words) + "."
        out.append(sentence)
        n += len(sentence) + 1
        i += 1
    return " ".join(out)[:chars]


def big_png_base64(limit_bytes: int) -> str:
    """A PNG of noise (it does not compress) whose base64 fills most of ``limit_bytes``."""
    import numpy as np
    from PIL import Image

    side = int(((limit_bytes * 0.7) * 3 / 4 / 3) ** 0.5)
    pixels = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", compress_level=1)
    return base64.b64encode(buf.getvalue()).decode()


def lag_buckets(base: str) -> dict[float, float]:
    """The gateway's lag histogram: upper bound (s) -> cumulative count."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    out: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(f"{METRIC}_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def worst(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The lag distribution between two reads: samples, those over the limit, the worst bucket."""
    delta = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = delta[float("inf")]
    bound = next((le for le in sorted(delta) if delta[le] >= total), float("inf"))
    below = max((le for le in delta if le < bound), default=0.0)
    over = total - max((delta[le] for le in delta if le <= LIMIT_S), default=0.0)
    return {"samples": int(total), "over_10ms": int(over),
            "worst_ms": f"{below * 1e3:g}-{bound * 1e3:g}" if bound != float("inf") else f"> {below * 1e3:g}",
            "worst_upper_ms": bound * 1e3}


def requests_for(mesh: FaultMesh, docs: int) -> list[tuple[str, str, str, bytes, Then | None]]:
    """(name, method, path, body, then) per route: the largest request it accepts, encoded once."""
    def enc(body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=False).encode()

    def wait_job(http: httpx.Client, resp: httpx.Response) -> None:
        """The job's own batches count too: 30 s of them (the whole job would take minutes), then cancelled."""
        if resp.status_code != 202:
            return
        job = resp.json()["id"]
        for _ in range(60):
            if http.get(f"/v1/jobs/{job}").json().get("state") in ("succeeded", "failed"):
                return
            time.sleep(0.5)
        http.post(f"/v1/jobs/{job}:cancel")

    q2000 = ("비 오는 날 읽기 좋은 소설과 출장비 청구 규정 " * 80)[:2000]
    settings_body = 32_000_000  # --max-ingest-body-bytes' default: 3 bytes a Korean character
    ingest_docs = min(10_000, settings_body // (3 * 20000 + 200) - 5)
    return [
        ("POST /v1/search (8 queries x 2,000 chars, top_k 100)", "POST", "/v1/search",
         enc({"collection": "long", "queries": [f"{i} {q2000}"[:2000] for i in range(8)], "top_k": 100}), None),
        ("POST /v1/recommendations (500 chars, top_k 20, reasons)", "POST", "/v1/recommendations",
         enc({"collection": "long", "query": q2000[:500], "top_k": 20}), None),
        ("POST /v1/answers (top_k 10 of 20,000-char documents, 2,000-char question)", "POST", "/v1/answers",
         enc({"collection": "long", "question": q2000, "top_k": 10, "min_score": 0}), None),
        ("POST /v1/embeddings (256 inputs x 2,000 chars)", "POST", "/v1/embeddings",
         enc({"model": "intfloat/multilingual-e5-small", "input": [f"{i} {q2000}"[:2000] for i in range(256)]}), None),
        ("POST /v1/chat/completions (near 2 MB of messages)", "POST", "/v1/chat/completions",
         enc({"model": "local", "messages": [{"role": "user", "content": long_text(i, 6000)} for i in range(100)]}),
         None),
        ("POST /v1/summaries (20,000 chars)", "POST", "/v1/summaries", enc({"text": long_text(1)}), None),
        (f"POST /v1/collections/{{name}}/documents ({ingest_docs} x 20,000 chars, ~32 MB) and 30 s of its job", "POST",
         "/v1/collections/bulk/documents",
         enc({"documents": [{"id": f"b{i}", "text": long_text(i)} for i in range(ingest_docs)]}), wait_job),
        ("POST /v1/ocr/jobs (one ~20 MB PNG)", "POST", "/v1/ocr/jobs",
         enc({"documents": [{"content_base64": big_png_base64(30_000_000)}]}), None),
    ]


def run(folder: Path, repeat: int, docs: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Start the mesh, measure each route, stop everything; the figures."""
    mesh = FaultMesh(folder, gateway_extra=("--loop-lag-probe-ms", "2", "--default-timeout-ms", "120000"))
    figures: dict[str, Any] = {"repeat": repeat, "routes": {}}
    try:
        mesh.start_all()
        with httpx.Client(base_url=mesh.base, timeout=600) as http:
            for name in ("long", "bulk"):
                assert http.post("/v1/collections", json={"name": name}).status_code == 201
            job = http.post("/v1/collections/long/documents", json={
                "documents": [{"id": f"l{i}", "text": long_text(100 + i)} for i in range(docs)]}).json()["id"]
            while http.get(f"/v1/jobs/{job}").json()["state"] not in ("succeeded", "failed"):
                time.sleep(0.5)
            time.sleep(2.0)
            before = lag_buckets(mesh.base)
            time.sleep(3.0)
            figures["idle_3s"] = worst(before, lag_buckets(mesh.base))
            log(f"idle: {figures['idle_3s']}")
            for name, method, path, body, then in requests_for(mesh, docs):
                statuses = []
                before = lag_buckets(mesh.base)
                t = time.perf_counter()
                for _ in range(1 if then else repeat):
                    resp = http.request(method, path, content=body, headers={"Content-Type": "application/json"})
                    statuses.append(resp.status_code)
                    if then:
                        then(http, resp)
                row = {**worst(before, lag_buckets(mesh.base)), "statuses": statuses,
                       "body_mb": round(len(body) / 1e6, 2), "wall_s": round(time.perf_counter() - t, 1)}
                figures["routes"][name] = row
                log(f"{name}: {row}")
    finally:
        mesh.close()
    return figures


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    p = argparse.ArgumentParser(prog="python -m bench.loop_lag", description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="requests per route (an ingest runs once)")
    p.add_argument("--docs", type=int, default=12, help="20,000-character documents for the answer route")
    p.add_argument("--out", type=Path, default=Path("bench/results/loop_lag"))
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loop-lag-") as tmp:
        figures = run(Path(tmp), args.repeat, args.docs)
    figures["wall_s"] = round(time.perf_counter() - t0, 1)
    rows = [["idle (3 s)", "-", str(figures["idle_3s"]["samples"]), figures["idle_3s"]["worst_ms"],
             str(figures["idle_3s"]["over_10ms"]), "yes" if figures["idle_3s"]["over_10ms"] == 0 else "**no**"]]
    for name, r in figures["routes"].items():
        rows.append([name, " ".join(map(str, r["statuses"])), str(r["samples"]), r["worst_ms"], str(r["over_10ms"]),
                     "yes" if r["over_10ms"] == 0 else "**no**"])
    table = md_table(["route (largest input)", "statuses", "lag samples", "worst lag (bucket, ms)",
                      "samples over 10 ms", "met (none over 10 ms)"], rows)
    lines = [f"- Wall time {figures['wall_s']} s. The gateway samples its loop every 2 ms; a stall shows as a sample "
             "as late as the stall, to within 2 ms. Each route's requests were sent one at a time after the last "
             "finished; an ingest's row includes its job running to the end. Statuses are the gateway's answers "
             "(the stand-in LLM writes plain text, so structured LLM routes may fail after their gateway work).",
             "", table, ""]
    out = args.out if args.out.is_absolute() else ROOT / args.out
    write_result(out.name, "Gateway event-loop lag under each route's largest input", lines, figures,
                 out=out.parent, command=command_line("bench.loop_lag", argv))
    print(table)


if __name__ == "__main__":
    main()
