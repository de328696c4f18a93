"""Tool calls on other teams' tools (issue 79): call, ask for a missing value, or decline, scored by code.

    python -m bench.tools_any --split tune [--limit 0] [--name tools_any_tune]

The embedded LLM server, the reasoning service and a gateway as processes; the official ``openai``
client sends each request of ``bench/data/tools_any_team.json`` with its four candidate tools and
``tool_choice: auto`` through ``/v1/chat/completions``. Per case the expectation is one of:

- ``call``: the right function; its arguments **exactly right** (every listed value equal; strings compared
  without spaces and case) and **loosely** right (strings containing each other); no value that is not
  in the words or derived by code (an argument not listed must be one the person's words hold);
- ``ask``: no call, and a reply that asks (ends with a question or asks to be told) naming a missing
  value's description;
- ``decline``: no call.

Figures: right function (call cases), arguments exactly / loosely right, calls when a call is right,
asks when a required value is missing, declines when no tool fits, p50 per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from bench.common import free_port, md_table, start_patient_reasoning, start_service, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server

DATA = Path(__file__).parent / "data" / "tools_any_team.json"


def _flat(v: Any) -> str:
    return re.sub(r"\s+", "", str(v)).casefold()


def judge(case: dict[str, Any], tools: dict[str, dict], got: str | None, arguments: dict | None,
          reply: str) -> dict[str, Any]:
    """The verdicts of one case."""
    expect = case["expect"]
    v: dict[str, Any] = {"expect": expect, "called": got is not None}
    if expect == "call":
        v["right_function"] = got == case["tool"]
        want = case.get("args") or {}
        if v["right_function"] and arguments is not None:
            v["args_exact"] = all(_flat(arguments.get(k)) == _flat(w) for k, w in want.items())
            v["args_loose"] = all(_flat(w) in _flat(arguments.get(k)) or _flat(arguments.get(k)) in _flat(w)
                                  and arguments.get(k) not in (None, "") for k, w in want.items())
            words = _flat(case["text"])
            extra = {k: x for k, x in arguments.items() if k not in want}
            v["ungrounded"] = [k for k, x in extra.items() if isinstance(x, str) and _flat(x) not in words]
        else:
            v["args_exact"] = v["args_loose"] = False
    elif expect == "ask":
        props = tools[case["tool"]]["parameters"]["properties"]
        labels = [str(props[k].get("description", k)).split("(")[0].strip() for k in case.get("missing", [])]
        asks = bool(re.search(r"\?|알려\s?주|말씀해\s?주|어디|몇|무엇|어떤|언제|누구", reply))
        v["asked"] = got is None and asks and any(lab[:2] in reply for lab in labels if lab)
    else:
        v["declined"] = got is None
    return v


async def run_cases(client: Any, data: dict[str, Any], split: str, limit: int) -> list[dict[str, Any]]:
    """Every case of the split (the first ``limit`` when > 0)."""
    tools = {t["function"]["name"]: t["function"] for t in data["tools"]}
    cases = data[split][:limit] if limit > 0 else data[split]
    rows = []
    for case in cases:
        offered = [t for t in data["tools"] if t["function"]["name"] in case["candidates"]]
        t0 = time.perf_counter()
        got, arguments, reply, error = None, None, "", None
        try:
            out = await client.chat.completions.create(model="local", temperature=0, max_tokens=200, tools=offered,
                                                       tool_choice="auto",
                                                       messages=[{"role": "user", "content": case["text"]}])
            msg = out.choices[0].message
            if msg.tool_calls:
                got = msg.tool_calls[0].function.name
                arguments = json.loads(msg.tool_calls[0].function.arguments or "{}")
            reply = msg.content or ""
        except openai.APIStatusError as err:
            error = f"{err.status_code} {str(err.body)[:120]}"
        seconds = time.perf_counter() - t0
        verdict = judge(case, tools, got, arguments, reply)
        rows.append({"case": case, "got": got, "arguments": arguments, "reply": reply, "error": error,
                     "seconds": round(seconds, 2), "verdict": verdict})
        print(f"[bench] {case['text'][:30]} -> {got} {json.dumps(arguments, ensure_ascii=False)[:80]} "
              f"{reply[:40]!r} {verdict}", flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The split's figures."""
    def share(vs: list[bool]) -> str:
        return f"{sum(vs)}/{len(vs)}" if vs else "-"

    calls = [r["verdict"] for r in rows if r["verdict"]["expect"] == "call"]
    return {"cases": len(rows), "right_function": share([v["right_function"] for v in calls]),
            "args_exact": share([v["args_exact"] for v in calls]),
            "args_loose": share([v["args_loose"] for v in calls]),
            "calls_when_right": share([v["called"] for v in calls]),
            "asks_when_missing": share([r["verdict"]["asked"] for r in rows if r["verdict"]["expect"] == "ask"]),
            "declines_when_none_fits": share([r["verdict"]["declined"] for r in rows
                                              if r["verdict"]["expect"] == "decline"]),
            "ungrounded_values": sum(len(v.get("ungrounded") or []) for v in calls),
            "errors": sum(r["error"] is not None for r in rows),
            "p50_s": round(statistics.median(r["seconds"] for r in rows), 2) if rows else None}


async def run(split: str, limit: int, data: dict[str, Any]) -> dict[str, Any]:
    """Start the LLM server, the reasoning service and a gateway; run the split."""
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-tools-any-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    procs = []
    try:
        rs, rs_port = start_patient_reasoning(llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--reasoning-first-token-s", "600", "--reasoning-generation-s", "600",
                                    "--reasoning-total-s", "600", "--reasoning-timeout-ms", "600000")
        procs.append(gw)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw_port}/v1", api_key="unused", max_retries=0,
                                      timeout=600) as client:
            rows = await run_cases(client, data, split, limit)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return {"model": llm.model, "split": split, "summary": summary(rows), "rows": rows}


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.tools_any", description=__doc__.split("\n")[0])
    parser.add_argument("--split", default="tune", help="split of the data file (tune shapes; report is reported)")
    parser.add_argument("--limit", type=int, default=0, help="cases at most (0: all)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--name", default=None, help="result name (default tools_any_<split>)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.split, args.limit, json.loads(args.data.read_text(encoding="utf-8"))))
    s = figures["summary"]
    keys = ["cases", "right_function", "args_exact", "args_loose", "calls_when_right", "asks_when_missing",
            "declines_when_none_fits", "ungrounded_values", "errors", "p50_s"]
    body = ["- The embedded model (llama.cpp server, one slot, 2 threads), the reasoning service and a gateway as "
            "processes on loopback; the official `openai` client, `tool_choice: auto`, four candidate tools per "
            "request (bench/data/tools_any_team.json).", "",
            md_table(["split", *keys], [[figures["split"], *(str(s[k]) for k in keys)]]), "", "## Cases", ""]
    for r in figures["rows"]:
        body.append(f"- `{r['case']['text']}` ({r['case']['expect']}) → {r['got']} "
                    f"{json.dumps(r['arguments'], ensure_ascii=False)} · {r['reply'][:80]!r}"
                    + (f" · error {r['error']}" if r["error"] else ""))
    write_result(args.name or f"tools_any_{args.split}", "Tool calls on any team's tools", body, figures,
                 out=args.out, command=command_line("bench.tools_any", argv))
    print("\n".join(body[:4]))


if __name__ == "__main__":
    main()
