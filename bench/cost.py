"""What each caller spends: usage equal to the responses', quota overshoot under concurrency, accounting overhead.

    python -m bench.cost [--requests 200]

Processes on loopback: redis-server, the reasoning service over the scripted OpenAI-compatible
stand-in (bench/standin.py: instant, fixed answers — what is measured is the gateway's accounting,
not a model), embedding and retrieval (the gateway's dependencies), and three gateways: two with API
keys, a quotas file and the usage ledger on the one Redis (two instances of one deployment), one
with ``--no-usage-accounting``. Measured:

- **usage = the responses' sum**: a mixed replay (chat completions, streamed and not, and /v1/chat)
  from three keys spread over both instances; ``GET /v1/usage?group_by=key`` per key against the sum
  of the ``usage`` objects the responses returned.
- **quota overshoot**: one key with a day's quota of five requests' tokens, reserving one request's
  tokens per request in flight; 16 concurrent callers, four rounds, over both instances: the tokens
  used past the quota, in requests (target ≤ 1).
- **overhead**: the same request alternately to an accounting gateway (a key with a quota: the
  reservation, the settlement and the counters on Redis) and to the one without, sequentially; the
  difference of the client-side p50 (target ≤ 1 ms).

With ``--workload``: a replayed mixed workload on the embedded 1.5B (minutes) — answers from a split of
bench/data/semantic_cache_ko.json (each base asked twice, its paraphrases, its near-misses), calendar_parse
twice per notice, chat — caches off, then on: hit rates per cache, near-misses served, tokens and cost
(an illustrative price table) per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import md_table, start_retrieval_pair, start_service, stop_service
from bench.report import command_line, write_result
from bench.standin import ChatStandIn
from gateway.http.auth import key_id
from services.runtime.processes import start_redis, stop_process

KEYS = ["bench-key-one", "bench-key-two", "bench-key-three", "bench-key-quota"]
CHAT = {"model": "local", "messages": [{"role": "user", "content": "선물 추천해 주세요"}], "max_tokens": 16}


def tokens(usage: dict) -> int:
    """A usage's tokens."""
    return usage["prompt_tokens"] + usage["completion_tokens"]


async def call(http: httpx.AsyncClient, key: str, kind: str) -> tuple[int, dict | None]:
    """One request of the replay: its status and the usage its response returned."""
    headers = {"X-API-Key": key}
    if kind == "stream":
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        usage = None
        async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {") and '"usage"' in line:
                    usage = json.loads(line[6:]).get("usage") or usage
            return resp.status_code, usage
    if kind == "chat":
        usage = None
        async with http.stream("POST", "/v1/chat", json={"session_id": f"s-{key}", "message": "안녕하세요"},
                               headers=headers) as resp:
            event = ""
            async for line in resp.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "done":
                    usage = json.loads(line[6:]).get("usage")
            return resp.status_code, usage
    r = await http.post("/v1/chat/completions", json=CHAT, headers=headers)
    return r.status_code, r.json().get("usage") if r.status_code == 200 else None


async def replay(urls: list[str]) -> dict[str, Any]:
    """Three keys, mixed routes, both instances: the usage counted against the responses' sum."""
    said: dict[str, dict[str, int]] = {}
    kinds = ["plain", "stream", "chat"]
    async with httpx.AsyncClient(timeout=60) as http:
        for i in range(60):
            key = KEYS[i % 3]
            http.base_url = httpx.URL(urls[i % 2])
            status, usage = await call(http, key, kinds[i % 3])
            if status == 200 and usage:
                mine = said.setdefault(key_id(key), {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})
                mine["requests"] += 1
                mine["prompt_tokens"] += usage["prompt_tokens"]
                mine["completion_tokens"] += usage["completion_tokens"]
        rows = []
        for key in KEYS[:3]:
            http.base_url = httpx.URL(urls[1])
            got = (await http.get("/v1/usage", params={"group_by": "key"}, headers={"X-API-Key": key})).json()
            total = got["total"]
            mine = said.get(key_id(key), {})
            rows.append({"key": key_id(key), "responses": mine,
                         "counted": {k: total[k] for k in ("requests", "prompt_tokens", "completion_tokens")},
                         "equal": all(total[k] == mine.get(k) for k in ("requests", "prompt_tokens",
                                                                       "completion_tokens"))})
    return {"rows": rows, "all_equal": all(r["equal"] for r in rows)}


async def overshoot(urls: list[str], per_request: int, limit: int) -> dict[str, Any]:
    """16 concurrent callers, four rounds, both instances, one key with a quota."""
    admitted = refused = used = 0
    async with httpx.AsyncClient(timeout=60) as one, httpx.AsyncClient(timeout=60) as two:
        one.base_url, two.base_url = httpx.URL(urls[0]), httpx.URL(urls[1])
        for _ in range(4):
            answers = await asyncio.gather(*(call(one if i % 2 else two, KEYS[3], "plain") for i in range(16)))
            for status, usage in answers:
                if status == 200 and usage:
                    admitted += 1
                    used += tokens(usage)
                elif status == 429:
                    refused += 1
    return {"limit_tokens": limit, "per_request_tokens": per_request, "admitted": admitted, "refused": refused,
            "used_tokens": used, "overshoot_requests": round(max(0, used - limit) / per_request, 2)}


def overhead(accounting: str, plain: str, n: int) -> dict[str, Any]:
    """Sequential requests alternating between the two gateways: client-side p50 and p95 of each."""
    times: dict[str, list[float]] = {"on": [], "off": []}
    with httpx.Client(timeout=60) as http:
        for url in (accounting, plain):  # warm both
            for _ in range(5):
                http.post(f"{url}/v1/chat/completions", json=CHAT, headers={"X-API-Key": KEYS[0]})
        for i in range(2 * n):
            url, label = (accounting, "on") if i % 2 == 0 else (plain, "off")
            t = time.perf_counter()
            r = http.post(f"{url}/v1/chat/completions", json=CHAT, headers={"X-API-Key": KEYS[0]})
            times[label].append((time.perf_counter() - t) * 1e3)
            r.raise_for_status()
    p50 = {k: statistics.median(v) for k, v in times.items()}
    p95 = {k: sorted(v)[int(0.95 * len(v)) - 1] for k, v in times.items()}
    return {"requests_each": n, "p50_ms": {k: round(v, 3) for k, v in p50.items()},
            "p95_ms": {k: round(v, 3) for k, v in p95.items()}, "overhead_p50_ms": round(p50["on"] - p50["off"], 3)}


NOTICES = ["[네이버] 2027 신입 공채 1차 면접 안내: 다음 주 화요일 오후 3시, 그린팩토리",
           "[카카오] 코딩 테스트 일정: 12월 14일 토요일 오전 10시부터 온라인으로 진행합니다.",
           "[토스] 최종 면접은 1월 8일 오후 2시 역삼 사옥에서 봅니다."]
CHATS = ["주말에 읽을 만한 소설 한 권 추천해 주세요.", "면접 전에 긴장을 푸는 방법을 알려 주세요.",
         "선물 포장 문구를 짧게 하나 써 주세요.", "백엔드 개발자 자기소개 첫 문장을 써 주세요."]
PRICE = [0.20, 0.80]  # illustrative USD per 1M prompt/completion tokens for the embedded model


def workload_requests(split: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """(path, body, kind) in replay order: every first asking, then the later ones (repeats, paraphrases …)."""
    first: list[tuple[str, dict[str, Any], str]] = []
    later: list[tuple[str, dict[str, Any], str]] = []
    for item in split:
        ask = {"collection": "answers-ko", "question": item["base"]}
        first.append(("/v1/answers", ask, "answer:first"))
        later.append(("/v1/answers", ask, "answer:repeat"))
        later += [("/v1/answers", {"collection": "answers-ko", "question": q}, "answer:paraphrase")
                  for q in item["paraphrases"]]
        later += [("/v1/answers", {"collection": "answers-ko", "question": q}, "answer:near_miss")
                  for q in item["near_misses"]]
    for notice in NOTICES:
        body = {"input": {"text": notice, "reference_date": "2026-12-06"}}
        first.append(("/v1/tasks/calendar_parse", body, "task:first"))
        later.append(("/v1/tasks/calendar_parse", body, "task:repeat"))
    chats = [("/v1/chat/completions", {"model": "local", "messages": [{"role": "user", "content": c}],
                                       "max_tokens": 48}, "chat") for c in CHATS]
    return first + chats[:2] + later + chats[2:]


def replay_workload(url: str, requests: list[tuple[str, dict[str, Any], str]], cached: bool) -> list[dict]:
    """Each request once, in order; per request its kind, whether a cache served it, its usage and time."""
    rows = []
    with httpx.Client(base_url=url, timeout=900) as http:
        for path, body, kind in requests:
            sent = body if path.startswith("/v1/chat") else {**body, "cache": cached}
            t = time.perf_counter()
            r = http.post(path, json=sent)
            out = r.json()
            usage = out.get("usage") if r.status_code == 200 else None
            served = bool(out.get("cached")) if r.status_code == 200 else False
            rows.append({"kind": kind, "status": r.status_code, "served_from_cache": served,
                         "answerable": out.get("answerable"), "ms": (time.perf_counter() - t) * 1e3,
                         "tokens": tokens(usage) if usage else 0, "cost_usd": (usage or {}).get("cost_usd", 0.0)})
            print(f"[bench] {'on ' if cached else 'off'} {kind}: {r.status_code} "
                  f"{'cached' if served else ''} {rows[-1]['ms']:.0f} ms", flush=True)
    return rows


def workload_figures(rows: list[dict]) -> dict[str, Any]:
    """Hit rates per cache, false hits, tokens and cost per request."""
    def share(kinds: tuple[str, ...]) -> float | None:
        mine = [r for r in rows if r["kind"].startswith(kinds)]
        return round(100 * sum(r["served_from_cache"] for r in mine) / len(mine), 1) if mine else None
    near = [r for r in rows if r["kind"] == "answer:near_miss"]
    return {"requests": len(rows), "errors": sum(r["status"] != 200 for r in rows),
            "answer_hit_rate": share(("answer",)), "answer_hit_rate_later": share(("answer:repeat",
                                                                                     "answer:paraphrase")),
            "paraphrase_hit_rate": share(("answer:paraphrase",)), "task_hit_rate": share(("task",)),
            "near_miss_false_hits": f"{sum(r['served_from_cache'] for r in near)}/{len(near)}",
            "tokens_per_request": round(sum(r["tokens"] for r in rows) / len(rows), 1),
            "cost_per_request_usd": sum(r["cost_usd"] for r in rows) / len(rows),
            "ms_p50": statistics.median(r["ms"] for r in rows)}


def workload(args: argparse.Namespace) -> None:
    """The replayed workload on the embedded LLM, caches off then on: bench/results/cost_cache.{md,json}."""
    from bench.answers import SLOW, ingest, load_answers_ko
    from bench.common import free_port, start_patient_reasoning
    from infra.llm.server import start_llm_server
    from services.runtime.models import current_model_dir

    data = Path(__file__).resolve().parent / "data" / "semantic_cache_ko.json"
    split = json.loads(data.read_text(encoding="utf-8"))[args.split]
    requests = workload_requests(split[:args.limit] if args.limit else split)
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-cost-llm-"))
    procs: list = []
    llm = None
    try:
        emb, ret = start_retrieval_pair(folder / "qdrant", current_model_dir(), procs)
        llm = start_llm_server(free_port(), log_path=folder / "llm.log")
        rs, rs_port = start_patient_reasoning(llm.base_url, "--prices-json", json.dumps({llm.model: PRICE}))
        procs.append(rs)
        gw, port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb}", "--retrieval-target",
                                 f"127.0.0.1:{ret}", "--reasoning-targets", f"127.0.0.1:{rs_port}", *SLOW)
        procs.append(gw)
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=300) as http:
            ingest(http, "answers-ko", load_answers_ko("all")[0])
        before = replay_workload(url, requests, cached=False)
        after = replay_workload(url, requests, cached=True)
    finally:
        for p in procs:
            stop_service(p)
        if llm is not None:
            llm.stop()
    off, on = workload_figures(before), workload_figures(after)
    down = 100 * (1 - on["cost_per_request_usd"] / off["cost_per_request_usd"]) if off["cost_per_request_usd"] else 0
    body = [f"Replayed workload: {len(requests)} requests — split `{args.split}` of bench/data/semantic_cache_ko.json "
            f"over answers-ko ({len(split[:args.limit] if args.limit else split)} base questions: each asked "
            "twice, its paraphrases and its near-misses), calendar_parse on 3 notices twice each, 4 chat "
            "completions — first with every cache off, then on. Embedded Qwen2.5-Coder-1.5B Q4 (llama-server, "
            f"2 threads); price table (illustrative): {PRICE} USD per 1M prompt/completion tokens.", "",
            md_table(["measure", "caches off", "caches on", "target"], [
                ["semantic answer cache: hits / answer requests", f"{off['answer_hit_rate']} %",
                 f"{on['answer_hit_rate']} %", "≥ 30 %"],
                ["… of repeats and paraphrases (the later askings)", f"{off['answer_hit_rate_later']} %",
                 f"{on['answer_hit_rate_later']} %", ""],
                ["… of paraphrases alone", f"{off['paraphrase_hit_rate']} %", f"{on['paraphrase_hit_rate']} %", ""],
                ["near-misses served from the cache (false hits)", off["near_miss_false_hits"],
                 on["near_miss_false_hits"], "≤ 1 %"],
                ["task cache: hits / task requests", f"{off['task_hit_rate']} %", f"{on['task_hit_rate']} %", ""],
                ["tokens per request", str(off["tokens_per_request"]), str(on["tokens_per_request"]), ""],
                ["cost per request (illustrative prices)", f"${off['cost_per_request_usd'] * 1e3:.4f} per 1k",
                 f"${on['cost_per_request_usd'] * 1e3:.4f} per 1k ({down:.0f} % less)", "−30 %"],
                ["latency p50", f"{off['ms_p50'] / 1e3:.2f} s", f"{on['ms_p50'] / 1e3:.2f} s", ""],
                ["errors", str(off["errors"]), str(on["errors"]), "0"]])]
    print(write_result("cost_cache", "What caching saves: a replayed workload", body,
                       {"split": args.split, "off": off, "on": on, "cost_down_percent": round(down, 1),
                        "rows": {"off": before, "on": after}}, out=args.out,
                       command=command_line("bench.cost", sys.argv[1:])))


def main(argv: list[str] | None = None) -> None:
    """Start the processes, measure, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per gateway for the overhead")
    parser.add_argument("--name", default="cost")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--workload", action="store_true", help="the replayed workload on the embedded LLM instead")
    parser.add_argument("--split", default="report", help="the semantic_cache_ko split the workload asks")
    parser.add_argument("--limit", type=int, default=0, help="base questions of the split at most (0: all)")
    args = parser.parse_args(argv)
    if args.workload:
        workload(args)
        return
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-cost-"))
    from services.runtime.models import current_model_dir

    standin = ChatStandIn(lambda body: {"chunks": ["추천", "드릴게요"]})
    redis, redis_url = start_redis(folder / "redis")
    procs: list = []
    try:
        emb, ret = start_retrieval_pair(folder / "qdrant", current_model_dir(), procs)
        rs, rs_port = start_service("services.reasoning", "--backend-url", standin.url)
        procs.append(rs)
        common = ["--embedding-target", f"127.0.0.1:{emb}", "--retrieval-target", f"127.0.0.1:{ret}",
                  "--reasoning-targets", f"127.0.0.1:{rs_port}", "--sessions-redis-url", redis_url]
        probe, probe_port = start_service("gateway", *common, "--no-usage-accounting")
        procs.append(probe)
        usage = httpx.post(f"http://127.0.0.1:{probe_port}/v1/chat/completions", json=CHAT, timeout=60).json()["usage"]
        per_request = tokens(usage)
        limit = 5 * per_request
        quotas = folder / "quotas.yaml"
        quotas.write_text(f"keys:\n  {key_id(KEYS[3])}: {{tokens_per_day: {limit}}}\n"
                          f"  {key_id(KEYS[0])}: {{tokens_per_month: 1000000000}}\n", encoding="utf-8")
        env = {"MESH_GATEWAY_API_KEYS": ",".join(KEYS)}
        urls, plain_url = [], ""
        for extra in (["--quotas-file", str(quotas), "--quota-request-tokens", str(per_request)],
                      ["--quotas-file", str(quotas), "--quota-request-tokens", str(per_request)],
                      ["--no-usage-accounting"]):
            gw, port = start_service("gateway", *common, *extra, env=env)
            procs.append(gw)
            if "--no-usage-accounting" in extra:
                plain_url = f"http://127.0.0.1:{port}"
            else:
                urls.append(f"http://127.0.0.1:{port}")
        equal = asyncio.run(replay(urls))
        over = asyncio.run(overshoot(urls, per_request, limit))
        cost = overhead(urls[0], plain_url, args.requests)
    finally:
        for p in procs:
            stop_service(p)
        stop_process(redis)
        standin.close()
    body = ["- Processes on loopback: redis-server, the reasoning service over the scripted stand-in LLM (instant, "
            "fixed answers), embedding, retrieval, two accounting gateways on the one Redis and one with "
            "`--no-usage-accounting`.", "",
            md_table(["measure", "value", "target"], [
                ["usage counted = the responses' usage (3 keys, 60 mixed requests over 2 instances)",
                 "equal" if equal["all_equal"] else "DIFFERENT", "equal"],
                ["quota overshoot, 16 concurrent callers × 4 rounds over 2 instances",
                 f"{over['overshoot_requests']} requests ({over['used_tokens']} of {over['limit_tokens']} tokens; "
                 f"{over['admitted']} admitted, {over['refused']} refused)", "≤ 1 request"],
                ["accounting overhead, p50 (on − off)",
                 f"{cost['overhead_p50_ms']} ms (on {cost['p50_ms']['on']} ms, off {cost['p50_ms']['off']} ms; "
                 f"{cost['requests_each']} requests each, alternating)", "≤ 1 ms"],
                ["semantic-cache hit rate, false hits, cost per request",
                 "on the embedded LLM: `python -m bench.cost --workload` (bench/results/cost_cache.md)",
                 "≥ 30 %, ≤ 1 %, −30 %"]]), "",
            "Per key: " + "; ".join(f"{r['key']}: responses {r['responses']}, counted {r['counted']}"
                                    for r in equal["rows"])]
    print(write_result(args.name, "What each caller spends", body, {"usage": equal, "quota": over, "overhead": cost},
                       out=args.out, command=command_line("bench.cost", argv)))


if __name__ == "__main__":
    main()
