"""Speculative decoding on the CPU default: the embedded model alone, then with the 0.5B of its family as draft.

    python -m bench.llm_speed [--draft qwen2.5-coder-0.5b-instruct-q4] [--limit N] [--name llm_speed]

For each configuration, one after the other on the same machine: the embedded LLM server (llama.cpp,
one slot, 2 threads; with ``--model-draft`` for the second), the reasoning service and a gateway as
processes; the declared tasks run on the report splits of bench/data/tasks_eval.json (``calendar_parse``
on the notices, ``resume_analysis`` of each résumé against its fitting posting, ``answer_feedback`` of
each strong answer), every run with ``"cache": false``. Reported per task: generation speed (the
reasoning service's ``usage.tokens_per_second``, median), time to the first token and the whole run
(p50, p95), and quality: calendar company, stage and start exact (as bench.tasks scores them), and for
every task whether the result is the same as the model alone wrote it (the draft only proposes tokens
the model checks, so at temperature 0 the output should not change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.common import free_port, md_table, start_patient_reasoning, start_service, stop_service
from bench.report import command_line, write_result
from bench.tasks import CASES, Runner, _start_ok
from infra.llm.server import start_llm_server


def cases(limit: int | None) -> list[tuple[str, dict, dict]]:
    """(task, input, expectation) of the report splits."""
    data = json.loads(CASES.read_text(encoding="utf-8"))
    out: list[tuple[str, dict, dict]] = []
    for c in data["calendar"]["report"][:limit]:
        out.append(("calendar_parse", {"text": c["text"], "reference_date": c["reference_date"]}, c))
    for c in data["analysis"]["report"][:limit]:
        out.append(("resume_analysis", {"resume": c["resume"], "posting": c["better"]}, {}))
    for c in data["feedback"]["report"][:limit]:
        out.append(("answer_feedback", {"question": c["question"], "answer": c["strong"]}, {}))
    return out


def run_config(config: str, draft: str, work: list[tuple[str, dict, dict]], folder: Path) -> list[dict[str, Any]]:
    """Every case on one configuration (``alone``, ``draft`` or a llama-server ``--spec-type``): results, usage."""
    llm = start_llm_server(free_port(), draft=draft if config == "draft" else "",
                           speculation=config if config not in ("alone", "draft") else "",
                           log_path=folder / f"llm-{config}.log")
    procs = []
    rows = []
    try:
        rs, rs_port = start_patient_reasoning(llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--reasoning-timeout-ms", "600000")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=600,
                          headers={"X-Request-Timeout-Ms": "300000"}) as http:
            listing = http.get("/v1/tasks").json()["tasks"]
            runner = Runner(http, {t["name"]: t["result_schema"] for t in listing})
            runner.run("calendar_parse", {"text": "내일 오후 3시 면접", "reference_date": "2026-03-02"})  # warm-up
            for task, value, expect in work:
                result, wall, body = runner.run(task, value)
                usage = (body or {}).get("usage") or {}
                row = {"task": task, "result": result, "wall_ms": wall, "tps": usage.get("tokens_per_second"),
                       "ttft_ms": usage.get("ttft_ms"), "completion_tokens": usage.get("completion_tokens"),
                       "prompt_tokens": usage.get("prompt_tokens")}
                if task == "calendar_parse" and result is not None:
                    row["right"] = (result.get("company") == expect["company"] and result.get("stage") ==
                                    expect["stage"] and _start_ok(result, expect["start"]))
                rows.append(row)
                print(f"[bench] {config} {task}: {row['tps']} tok/s {wall:.0f} ms", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return rows


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile (nearest rank)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    """Every configuration, one after another, then bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct-q4")
    parser.add_argument("--limit", type=int, default=None, help="at most this many cases per task")
    parser.add_argument("--configs", default="alone,draft",
                        help="alone, draft, or llama-server --spec-type values (ngram-simple, ngram-mod …)")
    parser.add_argument("--name", default="llm_speed")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    work = cases(args.limit)
    folder = Path(tempfile.mkdtemp(prefix="bench-llm-speed-"))
    runs = {c: run_config(c, args.draft, work, folder) for c in args.configs.split(",")}
    table = []
    for task in dict.fromkeys(t for t, _, _ in work):
        for config, rows in runs.items():
            mine = [r for r in rows if r["task"] == task]
            base = [r for r in runs["alone"] if r["task"] == task]
            same = sum(1 for a, b in zip(mine, base, strict=True) if a["result"] == b["result"])
            right = [r["right"] for r in mine if "right" in r]
            tps = [r["tps"] for r in mine if r["tps"]]
            walls = [r["wall_ms"] for r in mine]
            table.append([task, config, str(len(mine)), f"{statistics.median(tps):.1f}" if tps else "–",
                          f"{pct([r['ttft_ms'] for r in mine if r['ttft_ms']], 0.5) or 0:.0f}",
                          f"{pct(walls, 0.5):.0f}", f"{pct(walls, 0.95):.0f}",
                          f"{statistics.median([r['prompt_tokens'] or 0 for r in mine]):.0f}",
                          f"{sum(right)}/{len(right)}" if right else "–", f"{same}/{len(mine)}"])
    speed = {c: statistics.median([r["tps"] for r in rows if r["tps"]]) for c, rows in runs.items()}
    ratios = ", ".join(f"{c} {v:.1f} tokens/s = **{v / speed['alone']:.2f}×**"
                       for c, v in speed.items() if c != "alone")
    body = ["- The embedded Qwen2.5-Coder-1.5B Q4 (llama.cpp server, one slot, 2 threads): alone, with "
            f"`{args.draft}` as draft (`draft`: `--model-draft`, 2 threads), or with llama-server's draft-free "
            "speculation (`--spec-type`, named by the configuration); the reasoning service and a gateway as "
            "processes; the report splits of bench/data/tasks_eval.json, `cache: false`; the configurations one "
            "after another on this machine.", "",
            md_table(["task", "configuration", "runs", "tokens/s p50", "TTFT ms p50", "run ms p50", "run ms p95",
                      "input tokens p50", "calendar right", "same result as alone"], table), "",
            f"- Generation over every run (median): alone {speed['alone']:.1f} tokens/s; {ratios}."]
    print(write_result(args.name, "Speculative decoding on the CPU default", body,
                       {"draft": args.draft, "limit": args.limit, "runs": runs, "speed": speed}, out=args.out,
                       command=command_line("bench.llm_speed", argv)))


if __name__ == "__main__":
    main()
