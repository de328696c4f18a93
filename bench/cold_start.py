"""The first request after start: a six-tool chat completion on a freshly started mesh, several times.

    python -m bench.cold_start [--starts 5]

Each start is fresh: the embedded LLM server (llama.cpp, the pinned GGUF, empty prompt cache), the
reasoning service and a gateway as processes with their default settings (the gateway's 5 s
first-token stage), then at once the request a new user sends first — the six tools of
bench/data/llm_tool_cases.json, ``tool_choice: auto``, through the official ``openai`` client —
and everything is stopped. The target: 0 failures in 5 starts (before, the cold prompt's prefill
alone passed the 5 s first-token stage on two cores: 504).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from bench.common import free_port, md_table, start_service, stop_service
from bench.report import write_result
from infra.llm.server import start_llm_server

CASES = Path(__file__).parent / "data" / "llm_tool_cases.json"


def one_start(tools: Any, text: str) -> dict:
    """Start everything, send the first request, stop; what it answered and how long it took."""
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-cold-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    procs = []
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}")
        procs.append(gw)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{gw_port}/v1", api_key="unused", max_retries=0,
                               timeout=120)
        t = time.perf_counter()
        try:
            out = client.chat.completions.create(model="local", temperature=0, max_tokens=160, tools=tools,
                                                 tool_choice="auto", messages=[{"role": "user", "content": text}])
            calls = out.choices[0].message.tool_calls or []
            result = {"status": 200, "tool": calls[0].function.name if calls else None}  # type: ignore[union-attr]
        except openai.APIStatusError as err:
            result = {"status": err.status_code, "error": str(err)[:200]}
        result["seconds"] = round(time.perf_counter() - t, 2)
        return result
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()


def main() -> None:
    """Run the starts and write bench/results/cold_start.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    data = json.loads(CASES.read_text(encoding="utf-8"))
    texts = [c["text"] for c in data["cases"] if c["tool"]]
    rows = []
    for i in range(args.starts):
        r = one_start(data["tools"], texts[i * 7 % len(texts)])
        r["text"] = texts[i * 7 % len(texts)]
        rows.append(r)
        print(f"[bench] start {i + 1}: {r}", flush=True)
    failures = sum(1 for r in rows if r["status"] != 200)
    body = [
        f"- {args.starts} fresh starts of the embedded LLM server, the reasoning service and a gateway (default "
        "settings: the gateway's first-token stage 5 s; the reasoning service allows the prompt's estimated "
        "tokens at `--prefill-tokens-per-s` 110 on top), each sent at once one request with the six tools of "
        "bench/data/llm_tool_cases.json (`tool_choice: auto`) through the official `openai` client.",
        "",
        md_table(["start", "request", "status", "tool", "seconds"],
                 [[str(i + 1), r["text"], str(r["status"]), str(r.get("tool")), str(r["seconds"])]
                  for i, r in enumerate(rows)]),
        "",
        f"Failures: **{failures} of {args.starts}** (target 0).",
    ]
    print(write_result("cold_start", "The first request after start", body, {"rows": rows, "failures": failures},
                       out=args.out))


if __name__ == "__main__":
    main()
