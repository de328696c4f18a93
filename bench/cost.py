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

The semantic answer cache and cheap-model-first escalation (issue 65, items 3 and 4) are not built yet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
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


def main(argv: list[str] | None = None) -> None:
    """Start the processes, measure, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per gateway for the overhead")
    parser.add_argument("--name", default="cost")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
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
                ["semantic-cache hit rate, false hits, cost per request", "not built yet (items 3–5)", "≥ 30 %, ≤ 1 %, "
                 "−30 %"]]), "",
            "Per key: " + "; ".join(f"{r['key']}: responses {r['responses']}, counted {r['counted']}"
                                    for r in equal["rows"])]
    print(write_result(args.name, "What each caller spends", body, {"usage": equal, "quota": over, "overhead": cost},
                       out=args.out, command=command_line("bench.cost", argv)))


if __name__ == "__main__":
    main()
