"""Input tokens per LLM route, and whole documents against the sections a task reads (issue 63).

    python -m bench.llm_tokens [--parts routes,sections] [--name llm_tokens]

Processes on loopback: the embedded LLM server, embedding, retrieval, the reasoning service and a
gateway; the career documents of bench/data/assistant_docs.json ingested. Each route runs once on inputs
of the project's own evaluation sets (the first report case of each), and its ``usage.prompt_tokens``
(every LLM call of the request added up) is recorded with its calls and the run's time:

- the declared tasks ``calendar_parse``, ``resume_analysis``, ``answer_feedback``, and
  ``interview_question`` as at a session's fourth question (three answered pairs in its history);
- ``/v1/answers`` (a question the documents answer);
- an assistant session's first turn (small talk, no tool) and a search turn, and its tenth small-talk turn.

The résumés and postings of these sets are a few sentences; seed 001's profile (2,380 input tokens a
chat turn) comes from whole résumés, where cutting them to the sections a task reads matters most:

- **sections**: the whole résumés and postings of ``bench/data/whole_resumes.json`` (personal data,
  narratives, company history, benefits, hiring steps), each résumé analysed against a posting that fits
  it and one that does not, through two reasoning services on the one LLM server: one with
  ``--no-task-sections`` (whole documents in the prompt), one with the default cuts
  (services/runtime/tasks/sections.py). Per case: input tokens, match score, grade and skills found on
  each; the analysis is right when the fitting posting scores higher. And the first interview question
  on the fitting posting, whole and cut (its tokens; the questions shown).
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

from bench.common import free_port, ingest_catalog, md_table, start_llm_mesh, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server

DATA = Path(__file__).parent / "data"


def usage_sum(usages: list[dict]) -> dict[str, Any]:
    """Every LLM call's usage added up."""
    return {"prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usages),
            "completion_tokens": sum(u.get("completion_tokens", 0) for u in usages),
            "cached_prompt_tokens": sum(u.get("cached_prompt_tokens", 0) for u in usages),
            "llm_calls": sum(u.get("llm_calls", 1) for u in usages)}


def assistant_turn(http: httpx.Client, sid: str, text: str) -> tuple[list[dict], float]:
    """One assistant turn: the usages of its ``done`` event, and its time."""
    t = time.perf_counter()
    usages: list[dict] = []
    event = ""
    with http.stream("POST", f"/v1/assistant/sessions/{sid}/messages", json={"text": text}) as resp:
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "done":
                usages = json.loads(line[6:])["usage"]
    return usages, (time.perf_counter() - t) * 1e3


def measure(http: httpx.Client) -> list[dict[str, Any]]:
    """Each route once: its usage and time."""
    tasks = json.loads((DATA / "tasks_eval.json").read_text(encoding="utf-8"))
    interviews = json.loads((DATA / "interviews_eval.json").read_text(encoding="utf-8"))["sessions"][0]
    rows: list[dict[str, Any]] = []

    def task(name: str, value: dict, label: str) -> None:
        t = time.perf_counter()
        body = http.post(f"/v1/tasks/{name}", json={"input": value, "cache": False}).json()
        rows.append({"route": label, **usage_sum([body.get("usage") or {}]), "ms": (time.perf_counter() - t) * 1e3})

    cal = tasks["calendar"]["report"][0]
    task("calendar_parse", {"text": cal["text"], "reference_date": cal["reference_date"]}, "task calendar_parse")
    ana = tasks["analysis"]["report"][0]
    task("resume_analysis", {"resume": ana["resume"], "posting": ana["better"]}, "task resume_analysis")
    fb = tasks["feedback"]["report"][0]
    task("answer_feedback", {"question": fb["question"], "answer": fb["strong"]}, "task answer_feedback")
    history = [{"question": f"질문 {i + 1}", "answer": a} for i, a in enumerate(interviews["answers"][:3])]
    task("interview_question", {"resume": interviews["resume"], "posting": interviews["posting"],
                                "kind": interviews["kind"], "history": history,
                                "asked": []}, "interview question (4th)")  # as a session sends it: the
    # questions before those in history (none at the fourth), the history's own listed once
    t = time.perf_counter()
    question = {"collection": "career", "question": "한빛소프트웨어 재택근무는 며칠까지 돼?"}
    body = http.post("/v1/answers", json=question).json()
    rows.append({"route": "/v1/answers", **usage_sum([body.get("usage") or {}]), "ms": (time.perf_counter() - t) * 1e3})
    sid = http.post("/v1/assistant/sessions", json={"collections": ["career"], "caller": "bench"}).json()["id"]
    usages, ms = assistant_turn(http, sid, "안녕하세요! 오늘 면접 준비를 시작해요")
    rows.append({"route": "assistant: a turn without a tool (1st)", **usage_sum(usages), "ms": ms})
    usages, ms = assistant_turn(http, sid, "한빛소프트웨어 수습 기간은 얼마나 돼?")
    rows.append({"route": "assistant: a search turn (2nd)", **usage_sum(usages), "ms": ms})
    for i in range(7):
        assistant_turn(http, sid, f"{i + 3}번째 인사예요. 오늘도 화이팅!")
    usages, ms = assistant_turn(http, sid, "10번째 인사예요. 오늘도 화이팅!")
    rows.append({"route": "assistant: a turn without a tool (10th)", **usage_sum(usages), "ms": ms})
    return rows


def analyse(http: httpx.Client, resume: str, posting: str) -> dict[str, Any]:
    """One ``resume_analysis`` run: its tokens, time and result."""
    t = time.perf_counter()
    body = http.post("/v1/tasks/resume_analysis", json={"input": {"resume": resume, "posting": posting},
                                                        "cache": False}).json()
    return {"ms": (time.perf_counter() - t) * 1e3, **usage_sum([body.get("usage") or {}]),
            "result": body.get("result"), "error": body.get("error")}


def first_question(http: httpx.Client, resume: str, posting: str) -> dict[str, Any]:
    """The first interview question's tokens and text."""
    body = http.post("/v1/tasks/interview_question", json={"input": {"resume": resume, "posting": posting},
                                                           "cache": False}).json()
    return {**usage_sum([body.get("usage") or {}]), "question": (body.get("result") or {}).get("question")}


def measure_sections(whole: httpx.Client, cut: httpx.Client) -> list[dict[str, Any]]:
    """Each whole-résumé case on both services, one after the other."""
    pairs = json.loads((DATA / "whole_resumes.json").read_text(encoding="utf-8"))["pairs"]
    rows: list[dict[str, Any]] = []
    for pair in pairs:
        row: dict[str, Any] = {"id": pair["id"]}
        for label, http in (("whole", whole), ("cut", cut)):
            row[label] = {"fit": analyse(http, pair["resume"], pair["fit"]),
                          "unfit": analyse(http, pair["resume"], pair["unfit"]),
                          "question": first_question(http, pair["resume"], pair["fit"])}
            print(pair["id"], label, {k: row[label][k].get("prompt_tokens") for k in row[label]}, flush=True)
        rows.append(row)
    return rows


def score(run: dict) -> int | None:
    """A run's match score, None when it failed."""
    return (run.get("result") or {}).get("match_score")


def sections_body(rows: list[dict[str, Any]]) -> list[str]:
    """The sections part's tables and totals."""
    table = []
    tokens = {"whole": 0, "cut": 0}
    right = {"whole": 0, "cut": 0}
    same_skills = 0
    deltas: list[int] = []
    for row in rows:
        for label in ("whole", "cut"):
            fit, unfit = score(row[label]["fit"]), score(row[label]["unfit"])
            right[label] += int(fit is not None and unfit is not None and fit > unfit)
        for side in ("fit", "unfit"):
            w, c = row["whole"][side], row["cut"][side]
            tokens["whole"] += w["prompt_tokens"]
            tokens["cut"] += c["prompt_tokens"]
            wr, cr = w.get("result") or {}, c.get("result") or {}
            same_skills += int(sorted(wr.get("skills_found") or []) == sorted(cr.get("skills_found") or []))
            sw, sc = score(w), score(c)
            if sw is not None and sc is not None:
                deltas.append(abs(sw - sc))
            table.append([f"{row['id']} {side}", str(w["prompt_tokens"]), str(c["prompt_tokens"]),
                          f"{score(w)} {wr.get('grade', '–')}", f"{score(c)} {cr.get('grade', '–')}",
                          ", ".join(wr.get("skills_found") or []) or "–",
                          ", ".join(cr.get("skills_found") or []) or "–"])
    n = len(rows)
    questions = [[r["id"], str(r["whole"]["question"]["prompt_tokens"]), str(r["cut"]["question"]["prompt_tokens"]),
                  r["whole"]["question"].get("question") or "–", r["cut"]["question"].get("question") or "–"]
                 for r in rows]
    qw = sum(r["whole"]["question"]["prompt_tokens"] for r in rows)
    qc = sum(r["cut"]["question"]["prompt_tokens"] for r in rows)
    return ["## Whole documents against the sections a task reads", "",
            "- Two reasoning services on the one LLM server: `--no-task-sections` (whole) and the default cuts "
            "(cut); the cases of bench/data/whole_resumes.json, written after the cuts and before any run.", "",
            md_table(["case", "tokens whole", "tokens cut", "score whole", "score cut", "skills found whole",
                      "skills found cut"], table), "",
            f"- resume_analysis input tokens: {tokens['whole']} whole, {tokens['cut']} cut "
            f"({(tokens['cut'] - tokens['whole']) / max(tokens['whole'], 1):+.0%}).",
            f"- fitting posting scored higher: {right['whole']}/{n} whole, {right['cut']}/{n} cut; skills found the "
            f"same on {same_skills}/{2 * n} analyses; match score moved by "
            f"{statistics.median(deltas) if deltas else '–'} points (median), "
            f"{max(deltas) if deltas else '–'} at most.",
            "", md_table(["case", "tokens whole", "tokens cut", "question whole", "question cut"], questions), "",
            f"- interview_question input tokens: {qw} whole, {qc} cut ({(qc - qw) / max(qw, 1):+.0%})."]


def main(argv: list[str] | None = None) -> None:
    """Start the mesh, measure, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_tokens", description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="routes,sections")
    parser.add_argument("--name", default="llm_tokens")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    docs = json.loads((DATA / "assistant_docs.json").read_text(encoding="utf-8"))
    folder = Path(tempfile.mkdtemp(prefix="bench-llm-tokens-"))
    llm = start_llm_server(free_port(), log_path=folder / "llm.log")
    procs: list = []
    rows: list[dict[str, Any]] = []
    section_rows: list[dict[str, Any]] = []
    flags = ("--reasoning-first-token-s", "60", "--reasoning-generation-s", "120", "--reasoning-total-s", "180",
             "--reasoning-timeout-ms", "200000")
    headers = {"X-Request-Timeout-Ms": "300000"}
    try:
        gw = start_llm_mesh(llm.base_url, folder, procs, *flags)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw}", timeout=600, headers=headers) as http:
            if "routes" in parts:
                ingest_catalog(http, docs["collection"], {"kind": "keyword"}, docs["documents"])
                rows = measure(http)
            if "sections" in parts:
                whole_gw = start_llm_mesh(llm.base_url, folder / "whole", procs, *flags,
                                          reasoning_args=("--no-task-sections",))
                with httpx.Client(base_url=f"http://127.0.0.1:{whole_gw}", timeout=600, headers=headers) as whole:
                    section_rows = measure_sections(whole, http)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    body: list[str] = []
    if rows:
        body += ["- The embedded model, embedding, retrieval, the reasoning service and a gateway as processes on "
                 "loopback; each route once on the first report case of its evaluation set (`cache: false`); input "
                 "tokens are every LLM call of the request added up.", "",
                 md_table(["route", "LLM calls", "input tokens", "of them from the prompt cache", "output tokens",
                           "ms"],
                          [[r["route"], str(r["llm_calls"]), str(r["prompt_tokens"]),
                            str(r.get("cached_prompt_tokens", 0)), str(r["completion_tokens"]), f"{r['ms']:.0f}"]
                           for r in rows]), "",
                 "- The prompt cache is llama-server's (one slot): a call reuses the longest prefix it shares with "
                 "the call before it, so an assistant session's next turn reads its system prompt and history from "
                 "the cache when no other call ran between.", ""]
    if section_rows:
        body += sections_body(section_rows)
    print(write_result(args.name, "Input tokens per LLM route", body, {"rows": rows, "sections": section_rows},
                       out=args.out, command=command_line("bench.llm_tokens", argv)))


if __name__ == "__main__":
    main()
