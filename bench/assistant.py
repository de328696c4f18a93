"""The career assistant (issue 61) on the embedded model: right tool, right arguments, grounded answers, cost.

    python -m bench.assistant [--splits tune,report,held_out] [--limit N] [--name assistant]

Processes on loopback: the embedded LLM (llama.cpp server), the reasoning service, embedding, retrieval and
a gateway with the assistant's backend tool ``job_postings`` — a loopback HTTP stand-in answering postings
for the role and place asked (no operator's backend exists here). The career documents of
bench/data/assistant_docs.json are ingested as ``career``; every conversation of
bench/data/assistant_eval.json (written before the assistant's code; its ``about`` says which split
shaped what) runs in a session of its own, turn after turn, through ``POST /v1/assistant/sessions/{id}/messages``.

Per split: the right tool (the expected one called, or none when none is expected), the right arguments
(every expected value found: a substring of the call's text arguments, or for calendar turns the task's
resolved ``start`` and ``stage`` in its result), no call when none is needed, answerable questions
answered and unanswerable ones refused, citation precision (cited documents among the expected), the
time to the first event and the turn time (p50). Besides: a repeated backend call served from the cache
(ms), and the input tokens of the tenth turn of a small-talk session (the history is bounded).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import free_port, ingest_catalog, md_table, start_llm_mesh, stop_service
from bench.report import command_line, write_result
from bench.standin import ToolBackendStandIn
from infra.llm.server import start_llm_server

DATA = Path(__file__).parent / "data"
POSTINGS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["role"],
                   "properties": {"role": {"type": "string", "minLength": 1, "description": "직무"},
                                  "company": {"type": "string", "description": "회사"},
                                  "location": {"type": "string", "description": "근무지"}}}


def turn(http: httpx.Client, sid: str, text: str) -> dict[str, Any]:
    """One turn's events, the time to the first one and the turn time."""
    t0 = time.perf_counter()
    first = None
    out: dict[str, Any] = {"text": text, "tool": None, "arguments": None, "result": "", "answer": None, "reply": "",
                           "error": None, "usage": []}
    event = ""
    with http.stream("POST", f"/v1/assistant/sessions/{sid}/messages", json={"text": text}) as resp:
        if resp.status_code != 200:
            out["error"] = f"HTTP {resp.status_code}: {resp.read()[:200]!r}"
            return out
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                first = first if first is not None else (time.perf_counter() - t0) * 1e3
                data = json.loads(line[6:])
                if event == "tool_call":
                    out["tool"], out["arguments"], out["by"] = data["name"], data["arguments"], data.get("by")
                elif event == "tool_result":
                    out["result"], out["cached"] = data.get("summary") or data.get("error", ""), data["cached"]
                elif event == "answer":
                    out["answer"] = data
                elif event == "delta":
                    out["reply"] += data["text"]
                elif event == "done":
                    out["usage"], out["timings"], out["calls"] = data["usage"], data["timings"], data.get("calls")
                    out["answered_from"], out["session_check"] = data.get("answered_from"), data.get("session_check")
                elif event == "tool_refused":
                    out.setdefault("refused", []).append(data["name"])
                elif event == "error":
                    out["error"] = data["error"]["message"]
    out["first_ms"], out["turn_ms"] = first, (time.perf_counter() - t0) * 1e3
    return out


def judge(expect: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """The verdicts of one turn against its expectation."""
    want = expect.get("tool")
    # A list: either is right ("search" or null for a follow-up an earlier answer in the session holds).
    wants = want if isinstance(want, list) else [want]
    v: dict[str, Any] = {"right_tool": got["tool"] in wants, "needs_tool": wants != [None]}
    if want is not None and got["tool"] == want and expect.get("args"):
        text = json.dumps(got["arguments"], ensure_ascii=False) + got.get("result", "")
        v["right_args"] = all(str(value) in text for value in expect["args"].values())
    said = (got["answer"]["text"] if got.get("answer") else got.get("reply")) or ""
    if said:
        v["korean"] = bool(re.search(r"[가-힣]", said))  # the person wrote Korean: the reply follows
    if expect.get("leans_on") not in (None, "none"):  # a follow-up on an earlier answer or tool result
        refused = got.get("answer") is not None and not got["answer"]["answerable"]
        v["followed"] = (refused if expect.get("answerable") is False else
                         bool(said) and not refused and all(s in said for s in expect.get("expect_in_answer", [])))
    if "search" in wants and got["tool"] == "search" and got["answer"] is not None:
        a = got["answer"]
        cited = {c["id"] for c in a["citations"]}
        v["answerable"] = expect["answerable"]
        v["handled"] = a["answerable"] == expect["answerable"] and all(
            s in a["text"] for s in expect.get("expect_in_answer", []))
        if cited:
            v["citation_precision"] = len(cited & set(expect.get("cite", []))) / len(cited)
    return v


def run_split(http: httpx.Client, cases: list[dict], date: str) -> list[dict]:
    """Every conversation of a split, each in its own session."""
    runs = []
    for case in cases:
        sid = http.post("/v1/assistant/sessions", json={
            "collections": ["career"], "caller": "bench", "reference_date": date,
            "tools": ["search", "calendar_parse", "resume_analysis", "job_postings"]}).json()["id"]
        for expect in case["turns"]:
            got = turn(http, sid, expect["user"])
            runs.append({"case": case["id"], "expect": expect, "got": got, "verdict": judge(expect, got)})
            print(f"[bench] {case['id']}: {expect['user'][:30]} -> {got['tool']} {runs[-1]['verdict']}", flush=True)
    return runs


def summary(runs: list[dict]) -> dict[str, Any]:
    """A split's figures."""
    def share(values: list[bool]) -> float | None:
        return round(100 * sum(values) / len(values), 1) if values else None

    vs = [r["verdict"] for r in runs]
    p50 = lambda xs: round(statistics.median(xs), 1) if xs else None  # noqa: E731
    no_tool = [r for r in runs if r["expect"].get("tool") is None]
    searches = [r for r in runs if r["got"]["tool"] == "search" and not r["got"]["error"]]
    return {"turns": len(runs), "right_tool": share([v["right_tool"] for v in vs if v["needs_tool"]]),
            "right_args": share([v["right_args"] for v in vs if "right_args" in v]),
            "no_call_when_none_needed": share([v["right_tool"] for v in vs if not v["needs_tool"]]),
            "answerable_answered": share([v["handled"] for v in vs if v.get("answerable") is True]),
            "unanswerable_refused": share([v["handled"] for v in vs if v.get("answerable") is False]),
            "citation_precision": round(statistics.mean(ps), 3) if (ps := [v["citation_precision"] for v in vs
                                                                           if "citation_precision" in v]) else None,
            "follow_ups_answered": share([v["followed"] for v in vs if "followed" in v]),
            "replies_in_korean": share([v["korean"] for v in vs if "korean" in v]),
            "errors": [r["got"]["error"] for r in runs if r["got"]["error"]],
            "first_event_ms_no_tool_p50": p50([r["got"]["first_ms"] for r in no_tool if r["got"].get("first_ms")]),
            "turn_ms_search_p50": p50([r["got"]["turn_ms"] for r in searches]),
            "turn_ms_p50": p50([r["got"]["turn_ms"] for r in runs if r["got"].get("turn_ms")])}


def extras(http: httpx.Client, date: str) -> dict[str, Any]:
    """A repeated backend call (cache) and the input tokens of a tenth turn."""
    sid = http.post("/v1/assistant/sessions", json={"collections": ["career"], "caller": "bench-cache",
                                                    "tools": ["job_postings"]}).json()["id"]
    calls = [turn(http, sid, "판교 백엔드 개발자 공고 보여줘") for _ in range(2)]
    sid = http.post("/v1/assistant/sessions", json={"collections": ["career"], "caller": "bench-long",
                                                    "reference_date": date}).json()["id"]
    tokens = []
    for i in range(10):
        got = turn(http, sid, f"{i + 1}번째 인사예요. 오늘도 취업 준비 화이팅할게요!")
        tokens.append(sum(u.get("prompt_tokens", 0) for u in got["usage"]))
    return {"cache_second_call": {"tool": calls[1]["tool"], "cached": calls[1].get("cached"),
                                  "arguments": [c["arguments"] for c in calls],
                                  "first_ms": calls[0].get("turn_ms"), "again_ms": calls[1].get("turn_ms"),
                                  "tool_ms": [c.get("timings", {}).get("tool_ms") for c in calls]},
            "input_tokens_by_turn": tokens}


def cache_timing(tools_file: Path, calls: int = 200) -> dict[str, Any]:
    """A backend tool called once, then the same call (tool, arguments, caller) ``calls`` times: the cache's time.

    In this process, through gateway/assistant/backend_tools.py against the loopback stand-in: what a
    turn's tool step costs when the call repeats (the model's own time is the rest of a turn).
    """
    import asyncio

    from gateway.assistant.backend_tools import BackendTools, load_backend_tools

    async def run() -> dict[str, Any]:
        tools = BackendTools(load_backend_tools(tools_file))
        arguments = {"role": "백엔드 개발자", "location": "판교"}
        t = time.perf_counter()
        _, cached = await tools.call("job_postings", arguments, "k-bench", "bench")
        first = (time.perf_counter() - t) * 1e3
        times, hits = [], 0
        for _ in range(calls):
            t = time.perf_counter()
            _, cached = await tools.call("job_postings", arguments, "k-bench", "bench")
            times.append((time.perf_counter() - t) * 1e3)
            hits += cached
        await tools.close()
        return {"first_ms": round(first, 3), "cached_p50_ms": round(statistics.median(times), 4),
                "cached_max_ms": round(max(times), 4), "hits": hits, "calls": calls}

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    """Start the mesh, run the splits, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.assistant", description=__doc__.split("\n")[0])
    parser.add_argument("--splits", default="tune,report,held_out")
    parser.add_argument("--limit", type=int, default=None, help="at most this many conversations per split")
    parser.add_argument("--name", default="assistant")
    parser.add_argument("--cache-only", action="store_true", help="only the tool cache's timing (no model)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--sessions-file", type=Path, default=None,
                        help="sessions of another split (its `sessions`), run as the split `followups` "
                             "(e.g. bench/data/assistant_followups.json with --splits followups)")
    args = parser.parse_args(argv)
    data = json.loads((DATA / "assistant_eval.json").read_text(encoding="utf-8"))
    if args.sessions_file is not None:
        extra = json.loads(args.sessions_file.read_text(encoding="utf-8"))
        data["followups"], data["reference_date"] = extra["sessions"], extra["reference_date"]
    docs = json.loads((DATA / "assistant_docs.json").read_text(encoding="utf-8"))
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-assistant-"))
    backend = ToolBackendStandIn()
    url = f"{backend.base}/postings"
    tools = folder / "tools.json"
    tools.write_text(json.dumps({"allowed_hosts": ["127.0.0.1"], "tools": [
        {"name": "job_postings", "description": "채용 공고를 직무, 회사, 근무지로 찾습니다.",
         "parameters": POSTINGS_SCHEMA, "url": url, "timeout_s": 5, "secret": "bench-assistant-tool-secret"}]},
                                ensure_ascii=False), encoding="utf-8")
    if args.cache_only:
        timing = cache_timing(tools)
        backend.close()
        print(write_result(args.name, "The career assistant: a repeated backend-tool call", [
            "- gateway/assistant/backend_tools.py in this process, against the loopback stand-in backend: one call, "
            f"then the same call (tool, arguments, caller) {timing['calls']} times.", "",
            f"- First call {timing['first_ms']} ms; repeated calls served from the cache: {timing['hits']} of "
            f"{timing['calls']}, **{timing['cached_p50_ms']} ms p50**, {timing['cached_max_ms']} ms max."],
            timing, out=args.out, command=command_line("bench.assistant", argv)))
        return
    llm = start_llm_server(free_port(), log_path=folder / "llm.log")
    procs: list = []
    out: dict[str, Any] = {"model": llm.model, "splits": args.splits.split(","), "limit": args.limit,
                           "reference_date": data["reference_date"]}
    try:
        gw = start_llm_mesh(llm.base_url, folder, procs, "--assistant-tools-file", str(tools),
                            "--reasoning-first-token-s", "60", "--reasoning-generation-s", "120",
                            "--reasoning-total-s", "180", "--reasoning-timeout-ms", "200000")
        with httpx.Client(base_url=f"http://127.0.0.1:{gw}", timeout=600,
                          headers={"X-Request-Timeout-Ms": "300000"}) as http:
            ingest_catalog(http, docs["collection"], {"kind": "keyword"}, docs["documents"])
            for split in out["splits"]:
                runs = run_split(http, data[split][:args.limit], data["reference_date"])
                out[split] = {"summary": summary(runs), "runs": runs}
            out["extras"] = extras(http, data["reference_date"])
            got = [r["got"] for split in out["splits"] for r in out[split]["runs"]]
            out["extras"]["cache_hits"] = sum(1 for g in got if g.get("cached"))
            out["extras"]["tool_results"] = sum(1 for g in got if "cached" in g)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
        backend.close()
    rows = [[split, str(s["turns"]), *(f"{s[k]}" for k in ("right_tool", "right_args", "no_call_when_none_needed",
                                                             "answerable_answered", "unanswerable_refused",
                                                             "citation_precision", "follow_ups_answered",
                                                             "replies_in_korean", "first_event_ms_no_tool_p50",
                                                             "turn_ms_search_p50", "turn_ms_p50")),
             str(len(s["errors"]))] for split in out["splits"] for s in [out[split]["summary"]]]
    ex = out["extras"]
    body = ["- The embedded model (llama.cpp server, one slot, 2 threads), the reasoning service, embedding, retrieval "
            "and a gateway as processes on loopback; the gateway's LLM deadlines raised as `make run` does; "
            "`job_postings` a loopback stand-in backend; one session per conversation, its `reference_date` "
            f"{data['reference_date']}.", "",
            md_table(["split", "turns", "right tool %", "right arguments %", "no call when none needed %",
                      "answerable answered %", "unanswerable refused %", "citation precision",
                      "follow-ups answered %", "replies in Korean %", "first event, no tool, ms p50",
                      "turn with search ms p50", "turn ms p50", "errors"], rows), "",
            f"- A repeated backend call (the same message twice in one session): cached="
            f"{ex['cache_second_call']['cached']}, the tool's own time {ex['cache_second_call']['tool_ms'][1]} ms "
            f"(first call {ex['cache_second_call']['tool_ms'][0]} ms), the turn "
            f"{ex['cache_second_call']['again_ms']:.0f} ms (first {ex['cache_second_call']['first_ms']:.0f} ms); "
            f"arguments {json.dumps(ex['cache_second_call']['arguments'], ensure_ascii=False)}.",
            f"- Tool results served from the cache over the splits' turns: {ex['cache_hits']} of "
            f"{ex['tool_results']}.",
            f"- Input tokens per turn of a 10-turn session: {ex['input_tokens_by_turn']}.", "", "## Turns", ""]
    for split in out["splits"]:
        for r in out[split]["runs"]:
            g = r["got"]
            said = g["answer"]["text"] if g["answer"] else g["reply"] or g["error"] or ""
            called = json.dumps(g["arguments"], ensure_ascii=False)
            how = " (by code)" if g.get("by") == "code" else ""
            refused = f" [refused: {', '.join(g['refused'])}]" if g.get("refused") else ""
            body.append(f"- {split} · `{r['expect']['user']}` → {g['tool']}{how}{refused} {called} · {said[:120]}")
    print(write_result(args.name, "The career assistant", body, out, out=args.out,
                       command=command_line("bench.assistant", argv)))


if __name__ == "__main__":
    main()
