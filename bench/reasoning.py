"""Reasoning bench: TTFT through the mesh, prefix cache, calls and first card per recommendation, SSE load.

    python -m bench.reasoning [--rounds 3] [--out bench/results]
    python -m bench.reasoning --parts stream --stream-rounds 1     # one part only: printed, results kept

The reasoning service is called through its typed client (clients/reasoning.py), as the gateway does.

Everything runs as processes: the local LLM server (llama.cpp, the pinned GGUF), the reasoning
service and a gateway. One run, measured side by side:

1. TTFT / tokens/s for the same chat prompts (system + one user turn, 24 tokens, temperature 0)
   called directly on the LLM server (SSE), through the reasoning service (gRPC ``Chat``) and through
   the gateway (``POST /v1/chat``, SSE). Calls are interleaved and every user message starts with a
   unique tag, so each call reuses exactly the same cached prefix (system + template) whatever path
   came before it. The LLM's own TTFT varies by tens of milliseconds between calls, so the same three
   paths are also measured against a scripted stand-in server that answers at once (bench/standin.py,
   not a model): that isolates the mesh's own overhead.
2. A scripted 12-turn chat through the reasoning service: turn 12 with the engine's prefix cache warm
   (the previous turn was this conversation) vs cold (an unrelated prompt ran in between).
3. LLM calls per recommendation: reasons for 5 items in one call per query vs one call per item.
4. Streamed reasons (``GenerateReasonsStream``) for a 5-item set: time to the first card's reason vs
   the end-to-end time of all five (checks and any regeneration included), one query per round.
5. 16 concurrent SSE chat streams through the gateway: errors, terminal events, client-side TTFT.

A run of every part writes ``reasoning.md`` / ``.json``; ``--parts`` with fewer parts only prints.
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

from bench.common import free_port, md_table, start_service, stop_service
from bench.load import Request, arun_load
from bench.report import RunHeader, render, write_result
from bench.standin import ChatStandIn
from clients.reasoning import (
    AsyncReasoningClient,
    Delta,
    Item,
    Message,
    Options,
    Reason,
    ReasonsDone,
    StreamError,
    Timeouts,
)
from infra.llm.fetch import DEFAULT_MODEL, MODELS
from infra.llm.server import start_llm_server

SYSTEM = "당신은 한국어로 짧게 답하는 쇼핑 도우미입니다. 한두 문장으로 답하세요."
PROMPTS = ["비 오는 날 읽기 좋은 책을 추천해 주세요.", "부모님 결혼기념일 선물로 무엇이 좋을까요?",
           "신입 개발자 면접을 어떻게 준비하면 좋을까요?", "가성비 좋은 무선 이어폰을 고르는 기준은?",
           "캠핑 초보에게 필요한 준비물은 무엇인가요?"]
TURNS = ["안녕하세요, 선물을 고르고 있어요.", "어머니 생신 선물이에요.", "예산은 오만 원 정도예요.",
         "어머니는 요리를 좋아하세요.", "주방용품 중에 추천해 주세요.", "너무 흔한 건 피하고 싶어요.",
         "실용적인 게 좋겠어요.", "포장도 예쁘면 좋겠어요.", "배송은 빨리 와야 해요.", "후기가 좋은 걸로요.",
         "두 가지로 좁혀 주세요.", "그중 하나만 고른다면요?"]
ITEMS = [Item("g1", "스테인리스 냄비 3종 세트", "주방용품, 49,000원"),
         Item("g2", "원목 도마와 칼 선물 세트", "주방용품, 45,000원"),
         Item("g3", "향초와 디퓨저 세트", "리빙, 39,000원"), Item("g4", "실크 스카프", "패션, 48,000원"),
         Item("g5", "프리미엄 차 선물 세트", "식품, 35,000원")]
# One query per round of part 4 (another query each round: no answer comes from the prompt cache whole).
STREAM_QUERIES = ["요리를 좋아하는 어머니 생신 선물", "집들이 선물로 무난한 것", "은퇴하신 아버지께 드릴 선물",
                  "신혼부부에게 줄 실용적인 선물", "회사 동료 생일 선물"]
MAX_TOKENS = 24
LONG = Timeouts(first_token_s=300, generation_s=300, total_s=600)
PARTS = ("paths", "overhead", "prefix", "reasons", "stream", "concurrent")
TITLE = "Reasoning bench"


def median(xs: list[float]) -> float:
    """Median (0 for no samples)."""
    return statistics.median(xs) if xs else 0.0


def pct(xs: list[float], q: float) -> float:
    """q-th percentile by nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))] if s else 0.0


async def direct(http: httpx.AsyncClient, base: str, messages: list[dict]) -> tuple[float, float, int]:
    """(ttft s, total s, chunks) straight from the LLM server's SSE."""
    start = time.perf_counter()
    first = None
    n = 0
    body = {"messages": messages, "stream": True, "max_tokens": MAX_TOKENS, "temperature": 0}
    async with http.stream("POST", f"{base}/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                content = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if content:
                    first = first or time.perf_counter() - start
                    n += 1
    return first or 0.0, time.perf_counter() - start, n


async def via_service(client: AsyncReasoningClient, system: str, message: str,
                      history: list[Message] | tuple = ()) -> tuple[float, float, int, str]:
    """(ttft s, total s, deltas, text) through the reasoning service's Chat."""
    start = time.perf_counter()
    first = None
    parts: list[str] = []
    options = Options(max_tokens=MAX_TOKENS, temperature=0, timeouts=LONG)
    async for event in client.chat(message, system=system, history=history, options=options, timeout_s=900):
        if isinstance(event, Delta):
            first = first or time.perf_counter() - start
            parts.append(event.text)
        elif isinstance(event, StreamError):
            raise RuntimeError(event.message)
    return first or 0.0, time.perf_counter() - start, len(parts), "".join(parts)


async def via_gateway(http: httpx.AsyncClient, gw: str, message: str, session: str) -> tuple[float, float, int, str]:
    """(ttft s, total s, deltas, terminal event) through the gateway's SSE chat."""
    start = time.perf_counter()
    first = None
    n = 0
    last = ""
    body = {"session_id": session, "system": SYSTEM, "message": message, "max_tokens": MAX_TOKENS, "temperature": 0}
    async with http.stream("POST", f"{gw}/v1/chat", json=body) as resp:
        event = ""
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
                last = event
                if event == "delta":
                    first = first or time.perf_counter() - start
                    n += 1
    return first or 0.0, time.perf_counter() - start, n, last


async def paths(llm_base: str, client: AsyncReasoningClient, gw: str, rounds: int, quiet: bool = False) -> dict:
    """Part 1: the same prompts on three paths, interleaved."""
    out: dict[str, dict[str, list[float]]] = {p: {"ttft": [], "tps": []} for p in ("direct", "service", "gateway")}
    async with httpx.AsyncClient(timeout=600) as http:
        await direct(http, llm_base, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "준비"}])
        await via_service(client, SYSTEM, "준비")
        await via_gateway(http, gw, "준비", "warm")
        for r in range(rounds):
            order = ["direct", "service", "gateway"]
            order = order[r % 3:] + order[:r % 3]
            for i, prompt in enumerate(PROMPTS):
                for path in order:
                    message = f"[{r}{i}{path[0]}] {prompt}"
                    if path == "direct":
                        ttft, total, n = await direct(http, llm_base, [{"role": "system", "content": SYSTEM},
                                                                       {"role": "user", "content": message}])
                    elif path == "service":
                        ttft, total, n, _ = await via_service(client, SYSTEM, message)
                    else:
                        ttft, total, n, _ = await via_gateway(http, gw, message, f"bench-{r}-{i}")
                    out[path]["ttft"].append(ttft)
                    out[path]["tps"].append((n - 1) / (total - ttft) if n > 1 and total > ttft else 0.0)
                    if not quiet:
                        print(f"[bench] round {r} prompt {i} {path}: ttft {ttft * 1e3:.0f} ms", flush=True)
    return out


async def prefix(client: AsyncReasoningClient, rounds: int) -> dict:
    """Part 2: turn-12 TTFT warm vs cold."""
    warm: list[float] = []
    cold: list[float] = []
    per_turn: list[float] = []
    for r in range(rounds):
        history: list[Message] = []
        for t, turn in enumerate(TURNS):
            message = f"{turn} ({r})" if t == 0 else turn
            if t == len(TURNS) - 1:
                # After an unrelated prompt: it takes the engine's slot; llama-server keeps earlier prompts'
                # states in host memory (--cache-ram) and restores this conversation from there.
                await via_service(client, "다른 대화입니다.", f"무관한 질문 {r}")
                ttft_cold, *_ = await via_service(client, SYSTEM, message, history)
                # Warm: re-run turn 11 (this conversation again), then turn 12.
                prev_user, prev_answer = history[-2], history[-1]
                await via_service(client, SYSTEM, prev_user.content, history[:-2])
                ttft_warm, *_ = await via_service(client, SYSTEM, message, history)
                cold.append(ttft_cold)
                warm.append(ttft_warm)
                del prev_answer
                break
            ttft, _, _, text = await via_service(client, SYSTEM, message, history)
            if r == 0:
                per_turn.append(ttft)
            history += [Message("user", message), Message("assistant", text or "네.")]
        print(f"[bench] 12-turn chat round {r}: cold {cold[-1] * 1e3:.0f} ms, warm {warm[-1] * 1e3:.0f} ms", flush=True)
    return {"cold": cold, "warm": warm, "per_turn_warm_round0": per_turn}


async def per_query_vs_item(client: AsyncReasoningClient) -> dict:
    """Part 3: one call for five items vs five calls."""
    query = "요리를 좋아하는 어머니 생신 선물"
    options = Options(timeouts=LONG)
    start = time.perf_counter()
    one = await client.reasons(query, ITEMS, options=options, timeout_s=900)
    t_one = time.perf_counter() - start
    start = time.perf_counter()
    calls = tokens = 0
    for item in ITEMS:
        r = await client.reasons(query, [item], options=options, timeout_s=900)
        calls += r.usage.llm_calls
        tokens += r.usage.completion_tokens
    t_each = time.perf_counter() - start
    return {"per_query": {"calls": one.usage.llm_calls, "seconds": t_one, "completion_tokens":
                          one.usage.completion_tokens, "reasons": len(one.reasons)},
            "per_item": {"calls": calls, "seconds": t_each, "completion_tokens": tokens, "reasons": len(ITEMS)}}


async def streamed_reasons(client: AsyncReasoningClient, rounds: int) -> dict:
    """Part 4: time to the first card's reason vs to all five, through GenerateReasonsStream."""
    runs: list[dict] = []
    for r in range(rounds):
        query = STREAM_QUERIES[r % len(STREAM_QUERIES)]
        start = time.perf_counter()
        first: float | None = None
        order: list[tuple[str, str | None, float]] = []
        async for event in client.reasons_stream(query, ITEMS, options=Options(timeouts=LONG), timeout_s=900):
            now = time.perf_counter() - start
            if isinstance(event, Reason):
                first = first if first is not None else now
                order.append((event.item_id, event.status, now))
            elif isinstance(event, ReasonsDone):
                runs.append({"query": query, "first_reason_s": first or 0.0, "all_reasons_s": now,
                             "llm_ttft_s": event.usage.ttft_ns / 1e9, "llm_calls": event.usage.llm_calls,
                             "completion_tokens": event.usage.completion_tokens,
                             "cards": [{"id": i, "status": s, "at_s": round(t, 3)} for i, s, t in order]})
        print(f"[bench] streamed reasons round {r}: first card {runs[-1]['first_reason_s']:.1f} s, all "
              f"{len(ITEMS)} {runs[-1]['all_reasons_s']:.1f} s ({runs[-1]['llm_calls']} LLM calls; "
              + ", ".join(f"{c['id']} {c['status']} {c['at_s']:.1f}s" for c in runs[-1]["cards"]) + ")", flush=True)
    return {"items": len(ITEMS), "runs": runs, "first_reason_p50_s": median([x["first_reason_s"] for x in runs]),
            "all_reasons_p50_s": median([x["all_reasons_s"] for x in runs])}


async def concurrent(gw: str, n: int = 16) -> dict:
    """Part 5: n SSE chat streams at once through the gateway."""
    def make(i: int) -> Request:
        return "POST", "/v1/chat", {"json": {"session_id": f"conc-{i}", "system": SYSTEM, "message":
                                             f"[c{i}] {PROMPTS[i % len(PROMPTS)]}", "max_tokens": MAX_TOKENS,
                                             "temperature": 0}}

    load = await arun_load(gw, n, n, make, timeout_s=900, time_limit_s=60)
    streams = [o for o in load.outcomes if o.status is not None]
    last = [o.events[-1][0] if o.events else "" for o in streams]
    deltas = [sum(name == "delta" for name, _ in o.events or []) for o in streams]
    ttft = [o.first_event_s("delta") or 0.0 for o in streams]
    return {"streams": n, "raised": n - len(streams), "done": last.count("done"),
            "deltas_min": min(deltas, default=0), "deltas_max": max(deltas, default=0),
            "error_events": last.count("error"), "unterminated": sum(x not in ("done", "error") for x in last),
            "ttft_p50_s": median(ttft), "ttft_max_s": max(ttft, default=0.0), "wall_s": load.wall_s,
            "outcomes": load.counts()}


async def overhead(rounds: int) -> dict:
    """Part 1b: the three paths against an instant stand-in backend (the mesh's own overhead)."""
    standin = ChatStandIn([{"chunks": ["가"] * MAX_TOKENS}])
    procs = []
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", standin.url, "--backend-model", "standin")
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}")
        procs.append(gw)
        async with AsyncReasoningClient(f"127.0.0.1:{rs_port}") as client:
            return await paths(standin.url, client, f"http://127.0.0.1:{gw_port}", rounds, quiet=True)
    finally:
        for p in procs:
            stop_service(p)
        standin.close()


async def run(args) -> dict:
    """Start the processes, run the parts asked for."""
    out: dict = {}
    if "overhead" in args.parts:
        out["overhead"] = await overhead(args.overhead_rounds)
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-llm-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    procs = []
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--reasoning-first-token-s", "600", "--reasoning-generation-s", "600",
                                    "--reasoning-total-s", "600", "--reasoning-timeout-ms", "600000")
        procs.append(gw)
        gateway = f"http://127.0.0.1:{gw_port}"
        async with AsyncReasoningClient(f"127.0.0.1:{rs_port}") as client:
            if "paths" in args.parts:
                out["paths"] = await paths(llm.base_url, client, gateway, args.rounds)
            if "prefix" in args.parts:
                out["prefix"] = await prefix(client, args.rounds)
            if "reasons" in args.parts:
                out["reasons"] = await per_query_vs_item(client)
            if "stream" in args.parts:
                await via_service(client, SYSTEM, "준비")  # the model loaded and the system prompt cached
                out["stream"] = await streamed_reasons(client, args.stream_rounds)
        if "concurrent" in args.parts:
            out["concurrent"] = await concurrent(gateway)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return out


def report_lines(res: dict) -> list[str]:
    """The markdown body of the parts that ran."""
    model = MODELS[DEFAULT_MODEL]
    lines = [
        f"- LLM: `{model.name}` ({model.upstream}, GGUF Q4_K_M, {model.size / 1e9:.2f} GB) on llama.cpp's own "
        "llama-server, 2 threads, n_ctx 4096; the reasoning service and a gateway as processes, the "
        "service called through its typed client.", ""]
    if "paths" in res:
        p = res["paths"]
        base = median(p["direct"]["ttft"])
        rows = [[name, str(len(v["ttft"])), f"{median(v['ttft']) * 1e3:.0f}", f"{pct(v['ttft'], 95) * 1e3:.0f}",
                 f"{(median(v['ttft']) - base) * 1e3:+.1f}", f"{median(v['tps']):.1f}"] for name, v in p.items()]
        lines += [
            "## 1. TTFT and tokens/s by path (same prompts, interleaved)", "",
            f"System + one user turn, {MAX_TOKENS} tokens, temperature 0; TTFT measured by the caller; "
            "`vs direct` is the median difference.", "",
            md_table(["path", "n", "TTFT p50 ms", "TTFT p95 ms", "vs direct p50 ms", "tokens/s p50"], rows), ""]
    if "overhead" in res:
        o = res["overhead"]
        obase = median(o["direct"]["ttft"])
        orows = [[name, str(len(v["ttft"])), f"{median(v['ttft']) * 1e3:.2f}", f"{pct(v['ttft'], 95) * 1e3:.2f}",
                  f"{(median(v['ttft']) - obase) * 1e3:+.2f}"] for name, v in o.items()]
        lines += [
            "### 1b. The same three paths against an instant stand-in backend (the mesh's own overhead)", "",
            f"`bench/standin.py` streams {MAX_TOKENS} chunks at once (not a model); "
            f"{len(o['direct']['ttft'])} calls per path, interleaved.", "",
            md_table(["path", "n", "TTFT p50 ms", "TTFT p95 ms", "vs direct p50 ms"], orows), ""]
    if "prefix" in res:
        pre = res["prefix"]
        cold, warm = median(pre["cold"]), median(pre["warm"])
        lines += [
            "## 2. Prefix cache: turn 12 of a scripted chat (through the reasoning service)", "",
            md_table(["turn 12", "TTFT median ms", "samples ms"], [
                ["after an unrelated prompt (restored from the server's host-memory prompt cache)",
                 f"{cold * 1e3:.0f}",
                 ", ".join(f"{x * 1e3:.0f}" for x in pre["cold"])],
                ["warm (previous call was this conversation)", f"{warm * 1e3:.0f}",
                 ", ".join(f"{x * 1e3:.0f}" for x in pre["warm"])]]), "",
            f"Warm / cold = {warm / cold:.1%}. Warm TTFT per turn in round 0 (ms): "
            + ", ".join(f"{x * 1e3:.0f}" for x in pre["per_turn_warm_round0"]), ""]
    if "reasons" in res:
        rs = res["reasons"]
        lines += [
            "## 3. LLM calls per recommendation (5 items)", "",
            md_table(["strategy", "LLM calls", "wall s", "completion tokens"], [
                ["one call per query (GenerateReasons)", str(rs["per_query"]["calls"]),
                 f"{rs['per_query']['seconds']:.1f}", str(rs["per_query"]["completion_tokens"])],
                ["one call per item", str(rs["per_item"]["calls"]), f"{rs['per_item']['seconds']:.1f}",
                 str(rs["per_item"]["completion_tokens"])]]), ""]
    if "stream" in res:
        st = res["stream"]
        lines += [
            f"## 4. Streamed reasons: the first card vs all {st['items']} (GenerateReasonsStream)", "",
            "A card is sent the moment its JSON object closes in the LLM's answer and passes the checks; cards "
            "that fail are regenerated in one more streamed call and sent as their objects close there. "
            "Times from the call's start, as the client saw them.", "",
            md_table(["query", "first card s", f"all {st['items']} s", "LLM TTFT s", "LLM calls", "completion tokens",
                      "cards (status at s)"],
                     [[x["query"], f"{x['first_reason_s']:.1f}", f"{x['all_reasons_s']:.1f}", f"{x['llm_ttft_s']:.1f}",
                       str(x["llm_calls"]), str(x["completion_tokens"]),
                       ", ".join(f"{c['id']} {c['status']} {c['at_s']:.1f}" for c in x["cards"])]
                      for x in st["runs"]]), "",
            f"Median: first card {st['first_reason_p50_s']:.1f} s, all {st['items']} {st['all_reasons_p50_s']:.1f} s.",
            ""]
    if "concurrent" in res:
        c = res["concurrent"]
        lines += [
            "## 5. 16 concurrent SSE chat streams through the gateway", "",
            f"- streams {c['streams']}: `done` {c['done']}, `error` events {c['error_events']}, client exceptions "
            f"{c['raised']}, unterminated {c['unterminated']}; text deltas per stream "
            f"{c['deltas_min']}-{c['deltas_max']} (max_tokens {MAX_TOKENS})",
            f"- client TTFT p50 {c['ttft_p50_s']:.1f} s, max {c['ttft_max_s']:.1f} s, wall {c['wall_s']:.1f} s "
            "(the llama.cpp server runs one request at a time; the others queue)", ""]
    return lines


def write_report(args, res: dict) -> None:
    """Print the report; a run of every part also writes it as markdown and JSON into ``--out``."""
    lines = report_lines(res)
    if set(args.parts) != set(PARTS):
        print(render(TITLE, lines, RunHeader.collect()))
        print(f"(--parts {','.join(args.parts)}: {args.out} left as it was)")
        return
    print(write_result("reasoning", TITLE, lines, res, out=args.out))


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.reasoning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overhead-rounds", type=int, default=40, help="rounds of part 1b (5 prompts each)")
    parser.add_argument("--stream-rounds", type=int, default=3,
                        help=f"queries of part 4 (5 items each), at most {len(STREAM_QUERIES)}")
    parser.add_argument("--parts", type=lambda v: [p for p in v.split(",") if p], default=list(PARTS),
                        help=f"comma-separated parts to run ({','.join(PARTS)}); fewer than all only prints")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))} (choose from {', '.join(PARTS)})")
    if not 1 <= args.stream_rounds <= len(STREAM_QUERIES):
        # A query asked again is answered from llama-server's prompt cache (its first token at once):
        # such a round would measure the cache, not the answer.
        parser.error(f"--stream-rounds must be 1..{len(STREAM_QUERIES)}: a repeated query's prompt comes from "
                     "the server's prompt cache")
    write_report(args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
