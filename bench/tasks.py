"""Declared tasks on the embedded model: calendar fields, scores that mean something, consistency, overhead, cache.

    python -m bench.tasks [--splits tune,report] [--parts calendar,analysis,feedback,consistency,cache] [--limit N]

Everything runs as processes: the embedded LLM server (llama.cpp, the pinned GGUF), the reasoning
service (which runs the tasks: ``RunTask``) and a gateway; the client posts to ``/v1/tasks/{name}``.
The cases are ``bench/data/tasks_eval.json`` (its ``about`` says which split shaped what; the
report split was written before any run and changed nothing). Parts:

- **calendar**: ``calendar_parse`` on hiring notices: company exact, stage exact (closed list), start
  exact (to the minute, or the day of an all-day event) against each notice's reference date.
- **analysis**: ``resume_analysis`` of one résumé against a posting that fits it and one that does
  not: the fitting one must score higher (match score: 60 % skills found by code, 40 % the model).
- **feedback**: ``answer_feedback`` of a strong and a weak answer to one question: the strong one
  must have the higher overall score.
- **consistency**: the first report analysis 5 times (match-score standard deviation) and the first
  report feedback 3 times (identical scores), the response cache off.
- **cache**: one calendar notice once, then 20 times from the response cache (client-side p50).

Every result is validated against the task's ``result_schema`` from ``GET /v1/tasks``; the task
overhead is each uncached run's client-side time minus the LLM calls' own time (usage.total_ms).
Every run of the model uses ``"cache": false``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from bench.common import free_port, md_table, start_patient_reasoning, start_service, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server

CASES = Path(__file__).parent / "data" / "tasks_eval.json"
PARTS = ("calendar", "analysis", "feedback", "consistency", "cache", "standin")
STANDIN_OUTPUT = {"company": "카카오", "stage": "면접", "title": "1차 면접", "start_text": "다음 주 화요일 오후 3시",
                  "end_text": ""}


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


class Runner:
    """Posts task runs and keeps what every run shares: validity, overhead, failures."""

    def __init__(self, http: httpx.Client, schemas: dict[str, dict]) -> None:
        self.http = http
        self.schemas = schemas
        self.valid = 0
        self.returned = 0
        self.failures: list[str] = []
        self.overhead_ms: list[float] = []
        self.llm_ms: dict[str, list[float]] = {}

    def run(self, task: str, value: dict, *, cache: bool = False) -> tuple[dict | None, float, dict | None]:
        """One run: its result (None when it failed), the client-side ms and the whole response."""
        t0 = time.perf_counter()
        r = self.http.post(f"/v1/tasks/{task}", json={"input": value, "cache": cache})
        wall = (time.perf_counter() - t0) * 1e3
        if r.status_code != 200:
            self.failures.append(f"{task}: {r.status_code} {r.text[:200]}")
            return None, wall, None
        body = r.json()
        self.returned += 1
        if jsonschema.Draft202012Validator(self.schemas[task]).is_valid(body["result"]):
            self.valid += 1
        else:
            self.failures.append(f"{task}: result broke result_schema")
        if not body["cached"] and body.get("usage"):
            self.overhead_ms.append(wall - body["usage"]["total_ms"])
            self.llm_ms.setdefault(task, []).append(body["usage"]["total_ms"])
        return body["result"], wall, body


def _start_ok(result: dict, want: str) -> bool:
    start = result.get("start") or ""
    if len(want) == 10:  # a date without a time: the start is that day's beginning
        return start[:10] == want and start[11:16] == "00:00"
    return start[:16] == want


def calendar(runner: Runner, cases: list[dict]) -> dict[str, Any]:
    """Company, stage and start per notice."""
    rows = []
    for case in cases:
        result, wall, _ = runner.run("calendar_parse", {"text": case["text"], "reference_date": case["reference_date"]})
        got = result or {}
        rows.append({"text": case["text"][:40], "company": got.get("company") == case["company"],
                     "stage": got.get("stage") == case["stage"],
                     "start": bool(result) and _start_ok(got, case["start"]),
                     "got": {k: got.get(k) for k in ("company", "stage", "start", "start_text", "dates_from")},
                     "want": {k: case[k] for k in ("company", "stage", "start")}, "ms": round(wall)})
    n = len(rows)
    return {"n": n, **{f: round(100 * sum(r[f] for r in rows) / n, 1) for f in ("company", "stage", "start")},
            "misses": [r for r in rows if not (r["company"] and r["stage"] and r["start"])], "p50_ms": _p50(
                [r["ms"] for r in rows])}


def analysis(runner: Runner, cases: list[dict]) -> dict[str, Any]:
    """The fitting posting must score higher than the other."""
    pairs: list[dict[str, Any]] = []
    for case in cases:
        better, _, _ = runner.run("resume_analysis", {"resume": case["resume"], "posting": case["better"]})
        worse, _, _ = runner.run("resume_analysis", {"resume": case["resume"], "posting": case["worse"]})
        if better is None or worse is None:
            pairs.append({"ordered": False, "failed": True})
            continue
        pairs.append({"ordered": better["match_score"] > worse["match_score"],
                      "better": {k: better[k] for k in ("match_score", "skill_coverage", "experience_fit", "grade")},
                      "worse": {k: worse[k] for k in ("match_score", "skill_coverage", "experience_fit", "grade")},
                      "model_alone_ordered": better["experience_fit"] > worse["experience_fit"]})
    n = len(pairs)
    return {"n": n, "ordered": round(100 * sum(p["ordered"] for p in pairs) / n, 1),
            "model_alone_ordered": round(100 * sum(p.get("model_alone_ordered", False) for p in pairs) / n, 1),
            "pairs": pairs}


def feedback(runner: Runner, cases: list[dict]) -> dict[str, Any]:
    """The strong answer must have the higher overall score."""
    pairs: list[dict[str, Any]] = []
    for case in cases:
        strong, _, _ = runner.run("answer_feedback", {"question": case["question"], "answer": case["strong"]})
        weak, _, _ = runner.run("answer_feedback", {"question": case["question"], "answer": case["weak"]})
        if strong is None or weak is None:
            pairs.append({"ordered": False, "failed": True})
            continue
        pairs.append({"ordered": strong["overall"] > weak["overall"], "strong": strong["overall"],
                      "weak": weak["overall"]})
    n = len(pairs)
    return {"n": n, "ordered": round(100 * sum(p["ordered"] for p in pairs) / n, 1), "pairs": pairs}


def consistency(runner: Runner, data: dict) -> dict[str, Any]:
    """The same analysis 5 times, the same feedback 3 times, uncached."""
    a = data["analysis"]["report"][0]
    scores = [r["match_score"] for r in (runner.run("resume_analysis", {"resume": a["resume"],
                                                                         "posting": a["better"]})[0]
                                          for _ in range(5)) if r is not None]
    f = data["feedback"]["report"][0]
    marks = []
    for _ in range(3):
        r = runner.run("answer_feedback", {"question": f["question"], "answer": f["strong"]})[0]
        if r is not None:
            marks.append([r["criteria"][k]["score"] for k in sorted(r["criteria"])] + [r["overall"]])
    return {"analysis_scores": scores, "analysis_stdev": round(statistics.pstdev(scores), 2) if scores else None,
            "feedback_scores": marks, "feedback_identical": len(marks) == 3 and all(m == marks[0] for m in marks)}


def cache(runner: Runner, case: dict) -> dict[str, Any]:
    """One run, then 20 hits."""
    value = {"text": case["text"], "reference_date": case["reference_date"]}
    runner.run("calendar_parse", value, cache=True)
    hits = []
    for _ in range(20):
        _, wall, body = runner.run("calendar_parse", value, cache=True)
        if body is not None and body["cached"]:
            hits.append(wall)
    return {"hits": len(hits), "p50_ms": _p50(hits), "max_ms": round(max(hits), 2) if hits else None}


def standin(rounds: int = 60) -> dict[str, Any]:
    """The task's own cost: a task run and a plain schema-constrained completion through one gateway, taking turns.

    The backend is the scripted stand-in (bench/standin.py, not a model), answering the same JSON at
    once, so the difference is what the task machinery adds (input checks, render, validation, post
    step, result checks) over the two hops every LLM call makes.
    """
    from bench.standin import ChatStandIn

    text = json.dumps(STANDIN_OUTPUT, ensure_ascii=False)
    stand = ChatStandIn([{"chunks": [text[i:i + 8] for i in range(0, len(text), 8)]}])
    procs = []
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", stand.url, "--backend-model", "standin")
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=60) as http:
            schema = next(t for t in http.get("/v1/tasks").json()["tasks"]
                          if t["name"] == "calendar_parse")["output_schema"]
            notice = "[카카오] 1차 면접: 다음 주 화요일 오후 3시"
            task_body = {"input": {"text": notice, "reference_date": "2026-12-04"}, "cache": False}
            plain_body = {"model": "local", "temperature": 0, "max_tokens": 160,
                          "messages": [{"role": "user", "content": notice}],
                          "response_format": {"type": "json_schema", "json_schema": {"name": "calendar_parse",
                                                                                    "schema": schema}}}
            times: dict[str, list[float]] = {"task": [], "completion": []}
            for i in range(rounds + 5):
                for name, path, body in (("task", "/v1/tasks/calendar_parse", task_body),
                                         ("completion", "/v1/chat/completions", plain_body)):
                    t0 = time.perf_counter()
                    r = http.post(path, json=body)
                    ms = (time.perf_counter() - t0) * 1e3
                    if r.status_code != 200:
                        raise RuntimeError(f"{path}: {r.status_code} {r.text[:200]}")
                    if i >= 5:  # warm-up rounds left out
                        times[name].append(ms)
    finally:
        for p in procs:
            stop_service(p)
        stand.close()
    task, plain = _p50(times["task"]), _p50(times["completion"])
    return {"rounds": rounds, "task_p50_ms": task, "completion_p50_ms": plain,
            "task_over_completion_ms": round(task - plain, 2) if task is not None and plain is not None else None}


def run(parts: tuple[str, ...], splits: tuple[str, ...], limit: int | None) -> dict[str, Any]:
    """Start the LLM server, the reasoning service and a gateway; run the parts."""
    data = json.loads(CASES.read_text(encoding="utf-8"))
    if "standin" in parts:
        standin_figures = standin()
        if set(parts) == {"standin"}:
            return {"splits": [], "standin": standin_figures}
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-tasks-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    procs = []
    out: dict[str, Any] = {"model": llm.model, "splits": list(splits), "limit": limit}
    if "standin" in parts:
        out["standin"] = standin_figures
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
            for split in splits:
                part: dict[str, Any] = {}
                for name, fn in (("calendar", calendar), ("analysis", analysis), ("feedback", feedback)):
                    if name in parts:
                        part[name] = fn(runner, data[name][split][:limit])
                out[split] = part
            if "consistency" in parts:
                out["consistency"] = consistency(runner, data)
            if "cache" in parts:
                out["cache"] = cache(runner, data["calendar"]["report"][0])
            out["valid"] = {"returned": runner.returned, "valid": runner.valid}
            out["failures"] = runner.failures
            out["overhead_ms"] = {"n": len(runner.overhead_ms), "p50": _p50(runner.overhead_ms),
                                  "max": round(max(runner.overhead_ms), 2) if runner.overhead_ms else None}
            out["llm_ms_p50"] = {task: _p50(v) for task, v in runner.llm_ms.items()}
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return out


def markdown(f: dict[str, Any]) -> list[str]:
    """The figures as tables."""
    rows = []
    for split in f["splits"]:
        part = f.get(split, {})
        c, a, fb = part.get("calendar"), part.get("analysis"), part.get("feedback")
        rows.append([split, f"{c['company']} % / {c['stage']} % / {c['start']} % (n={c['n']})" if c else "-",
                     f"{a['ordered']} % (n={a['n']}; model alone {a['model_alone_ordered']} %)" if a else "-",
                     f"{fb['ordered']} % (n={fb['n']})" if fb else "-"])
    lines = ["## Quality", "", md_table(["split", "calendar company / stage / start exact",
                                         "analysis: fitting posting scores higher", "feedback: strong answer higher"],
                                        rows), ""]
    if "consistency" in f:
        c = f["consistency"]
        lines += ["## Consistency (temperature 0, fixed seed, cache off)", "",
                  f"- resume_analysis 5 runs: match scores {c['analysis_scores']}, standard deviation "
                  f"**{c['analysis_stdev']}** (target < 5)",
                  f"- answer_feedback 3 runs: scores {c['feedback_scores']}, identical: **{c['feedback_identical']}**",
                  ""]
    if "standin" in f:
        st = f["standin"]
        lines += ["## The task's own cost (instant stand-in backend, not a model)", "",
                  f"- `POST /v1/tasks/calendar_parse` p50 {st['task_p50_ms']} ms vs the same schema-constrained "
                  f"`/v1/chat/completions` p50 {st['completion_p50_ms']} ms, taking turns, {st['rounds']} rounds: "
                  f"the task adds **{st['task_over_completion_ms']} ms** (target ≤ 10 ms)", ""]
    if "valid" not in f:
        return lines
    lines += ["## Validity, overhead, cache", "",
              f"- results returned {f['valid']['returned']}, valid against result_schema {f['valid']['valid']} "
              f"(failures: {len(f['failures'])})",
              f"- task overhead over the LLM calls (client time − usage.total_ms), p50 "
              f"**{f['overhead_ms']['p50']} ms** (max {f['overhead_ms']['max']}, n={f['overhead_ms']['n']})",
              f"- LLM time per run p50 (ms): {f['llm_ms_p50']}"]
    if "cache" in f:
        lines.append(f"- cache hit, client side: p50 **{f['cache']['p50_ms']} ms** (max {f['cache']['max_ms']}, "
                     f"{f['cache']['hits']} hits)")
    lines += ["", "## Misses", ""]
    for split in f["splits"]:
        c = f.get(split, {}).get("calendar")
        for miss in (c or {}).get("misses", []):
            lines.append(f"- {split} calendar: `{miss['text']}` got {miss['got']} want {miss['want']}")
        for name in ("analysis", "feedback"):
            for p in f.get(split, {}).get(name, {}).get("pairs", []):
                if not p["ordered"]:
                    lines.append(f"- {split} {name}: {json.dumps(p, ensure_ascii=False)}")
    lines += [f"- failure: {x}" for x in f["failures"]]
    return lines


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.tasks", description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    parser.add_argument("--splits", default="tune,report", help="splits of tasks_eval.json [tune,report]")
    parser.add_argument("--limit", type=int, default=None, help="at most this many cases per part and split")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="results folder")
    parser.add_argument("--name", default="tasks", help="result file name [tasks]")
    args = parser.parse_args(argv)
    parts = tuple(p for p in args.parts.split(",") if p)
    figures = run(parts, tuple(args.splits.split(",")), args.limit)
    body = ["- The embedded model (llama.cpp server, one slot, 2 threads), the reasoning service (RunTask) and a "
            "gateway as processes on loopback; `POST /v1/tasks/{name}` with the response cache off except in the "
            "cache part. Cases: bench/data/tasks_eval.json.", "", *markdown(figures)]
    write_result(args.name, "Declared tasks", body, figures, out=args.out, command=command_line("bench.tasks", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
