"""Mock interview sessions: next-question latency, report consistency, three instances with one killed.

    python -m bench.interviews [--parts latency,report,instances] [--sessions N]

Parts:

- **latency** (the embedded model): the sessions of ``bench/data/interviews_eval.json`` through one
  gateway, as processes. Each answer is sent once the next question is prepared (``GET`` says so:
  the candidate took the time to answer) and its response time is the *prepared* latency; one short
  answer per session shows the *follow-up* latency (written after the answer, by the model); a last
  session answers each question at once (*no time to prepare*: the answer waits for the preparation).
- **report**: the first session scored twice with ``"cache": false`` (answer_feedback at temperature 0):
  the two reports' scores must be identical.
- **ready** (the embedded model): one session of five answers, each sent once the next question is
  prepared and the answers before it are scored (a person takes longer than that to answer). Then
  ``/report:stream`` at once after the last answer (it waits only for that answer's score), again once
  every score is stored (it only gathers), and ``/report`` with ``"cache": false`` (every answer scored
  when the report is asked for: what a report cost before answers were scored as they came).
- **instances** (the scripted stand-in LLM, bench/standin.py — what is measured is the state, not the
  model): three gateways on one Redis, every turn of every session sent to another instance, one
  instance killed (SIGKILL) a third of the way through; a client whose instance fails sends the same
  answer to the next one. Counted: sessions completed, answers acknowledged but not in the final
  state (lost), turns recorded twice or answers recorded for the wrong turn (duplicates). Then the
  refusals: unknown session, answer to a finished session, empty and over-long answers, report
  before any answer.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.common import free_port, md_table, start_patient_reasoning, start_service, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server
from services.runtime.processes import start_redis

CASES = Path(__file__).parent / "data" / "interviews_eval.json"
PARTS = ("latency", "report", "ready", "instances")


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _wait_prepared(http: httpx.Client, sid: str, timeout_s: float = 300) -> float:
    """Seconds until the session's next main question is prepared (or there is none to prepare)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        state = http.get(f"/v1/interviews/{sid}").json()
        mains = max(t["question"]["main"] for t in state["turns"])
        if state["prepared"] or mains >= state["questions"]:
            return time.perf_counter() - t0
        time.sleep(0.2)
    return time.perf_counter() - t0


def _answer(http: httpx.Client, sid: str, turn: int, text: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = http.post(f"/v1/interviews/{sid}/answers", json={"answer": text, "turn": turn})
    ms = (time.perf_counter() - t0) * 1e3
    r.raise_for_status()
    return r.json(), ms


def latency(http: httpx.Client, data: dict) -> dict[str, Any]:
    """Prepared, follow-up and unprepared next-question latencies; the sessions' ids for the report part."""
    out: dict[str, Any] = {"prepared_ms": [], "follow_up_ms": [], "unprepared_ms": [], "start_ms": [],
                           "prepare_wait_s": [], "sources": {}, "sessions": [], "questions": []}
    for case in data["sessions"]:
        t0 = time.perf_counter()
        r = http.post("/v1/interviews", json={"resume": case["resume"], "posting": case["posting"],
                                              "kind": case["kind"], "questions": len(case["answers"])})
        r.raise_for_status()
        out["start_ms"].append((time.perf_counter() - t0) * 1e3)
        turn = r.json()
        sid = turn["id"]
        out["sessions"].append(sid)
        answers = list(case["answers"])
        answers.insert(1, case["short_answer"])  # the second answer is short: a follow-up on it
        for text in answers:
            question = turn["question"]
            if question is None:
                break
            out["questions"].append(question["text"])
            out["prepare_wait_s"].append(round(_wait_prepared(http, sid), 2))
            turn, ms = _answer(http, sid, question["turn"], text)
            nxt = turn["question"]
            if nxt is None:
                continue
            out["sources"][nxt["source"] + ("+follow_up" if nxt["follow_up"] else "")] = \
                out["sources"].get(nxt["source"] + ("+follow_up" if nxt["follow_up"] else ""), 0) + 1
            if nxt["follow_up"]:
                out["follow_up_ms"].append(ms)
            elif nxt["source"] == "prepared":
                out["prepared_ms"].append(ms)
            else:
                out["unprepared_ms"].append(ms)
    case = data["sessions"][0]  # answered at once: the preparation has had no time
    r = http.post("/v1/interviews", json={"resume": case["resume"], "posting": case["posting"],
                                          "kind": case["kind"], "questions": 3})
    r.raise_for_status()
    turn = r.json()
    immediate = []
    for text in case["answers"][:2]:
        turn, ms = _answer(http, turn["id"], turn["question"]["turn"], text)
        immediate.append(ms)
    out["immediate_ms"] = immediate
    return out


def report(http: httpx.Client, sid: str) -> dict[str, Any]:
    """The session scored twice, the cache off: are the scores identical."""
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        r = http.post(f"/v1/interviews/{sid}/report", json={"cache": False})
        r.raise_for_status()
        runs.append(((time.perf_counter() - t0) * 1e3, r.json()))
    scores = [[(a["turn"], {c: v["score"] for c, v in a["criteria"].items()}, a["overall"]) for a in rep["answers"]]
              for _, rep in runs]
    return {"answers": len(scores[0]), "identical": scores[0] == scores[1],
            "overall": [rep["overall"] for _, rep in runs],
            "criteria_mean": runs[0][1]["criteria_mean"], "report_ms": [round(ms, 1) for ms, _ in runs],
            "summary": runs[0][1]["summary"], "cached": [any(a["cached"] for a in rep["answers"]) for _, rep in runs]}


def _stream_report(http: httpx.Client, sid: str) -> tuple[float, float, dict]:
    """``/report:stream``: ms to the first event, ms to the end, the report."""
    t0 = time.perf_counter()
    first, report, event = None, {}, ""
    with http.stream("POST", f"/v1/interviews/{sid}/report:stream", json={}) as resp:
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                first = first if first is not None else (time.perf_counter() - t0) * 1e3
                if event == "report":
                    report = json.loads(line[6:])
                elif event == "error":
                    raise RuntimeError(line)
    return first or 0.0, (time.perf_counter() - t0) * 1e3, report


def ready(http: httpx.Client, case: dict, more: list[str], questions: int = 5) -> dict[str, Any]:
    """The report after the last answer: waiting for its score, gathering only, and scoring everything then.

    ``more``: answers of other sessions, used after the case's own so that no answer repeats (a repeated
    question and answer would be answered from the response cache).
    """
    start = http.post("/v1/interviews", json={"resume": case["resume"], "posting": case["posting"],
                                              "kind": case["kind"], "questions": questions}).json()
    sid, turn = start["id"], 1
    answers = [*case["answers"], *more][:questions]
    scored_at: list[float] = []
    for k, text in enumerate(answers):
        while True:  # the person answers after the answers before are scored and the next question is ready
            state = http.get(f"/v1/interviews/{sid}").json()
            if (state.get("scored") or 0) >= k and (state["prepared"] or k == questions - 1 or k == 0):
                break
            time.sleep(0.2)
        body, _ = _answer(http, sid, turn, text)
        last_answer = time.perf_counter()
        turn += 1
    first_ms, total_ms, rep = _stream_report(http, sid)
    wait_ms = (time.perf_counter() - last_answer) * 1e3
    while (http.get(f"/v1/interviews/{sid}").json().get("scored") or 0) < questions:
        time.sleep(0.2)
    scored_at.append((time.perf_counter() - last_answer) * 1e3)
    gather_first, gather_total, again = _stream_report(http, sid)
    t = time.perf_counter()
    before = http.post(f"/v1/interviews/{sid}/report", json={"cache": False}).json()
    before_ms = (time.perf_counter() - t) * 1e3
    return {"answers": questions, "after_last_answer": {"first_event_ms": round(first_ms, 1),
                                                        "complete_ms": round(total_ms, 1),
                                                        "complete_after_answer_ms": round(wait_ms, 1)},
            "after_every_score": {"first_event_ms": round(gather_first, 1), "complete_ms": round(gather_total, 1)},
            "scoring_everything_at_report_ms": round(before_ms, 1), "grade": rep.get("grade"),
            "same_scores": [a["overall"] for a in rep.get("answers", [])] == [a["overall"] for a in again["answers"]],
            "overall": rep.get("overall"), "overall_rescored": before.get("overall"),
            "cached": [a["cached"] for a in rep.get("answers", [])]}


def _standin_reply(body: dict) -> dict:
    """A question numbered by the questions asked, or scores from the answer's length (instantly, 50 ms)."""
    system, prompt = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "면접관" in system:
        kind = "꼬리" if "꼬리 질문 하나를 쓰세요" in prompt else "본"
        asked = prompt.count(chr(10) + "- ") + prompt.count("Q: ")  # listed as asked, or in the history
        out: dict[str, Any] = {"question": f"{kind} 질문 {asked + 1}: 어떻게 하셨나요?", "topic": "경험"}
    else:
        crit = {"score": 7, "reason": "근거"}
        out = {"criteria": dict.fromkeys(("accuracy_logic", "relevance", "expression", "practical_depth"), crit),
               "good_points": [], "improvements": [], "feedback": "좋습니다."}
    return {"chunks": [json.dumps(out, ensure_ascii=False)], "first_delay_s": 0.05}


class Fleet:
    """Gateways by index; a dead one is skipped."""

    def __init__(self, ports: list[int], procs: list) -> None:
        self.clients = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=30) for p in ports]
        self.procs = procs
        self.dead: set[int] = set()
        self.lock = threading.Lock()
        self.turns_done = 0
        self.retried = 0

    def send(self, i: int, method: str, path: str, body: dict | None = None) -> tuple[int, httpx.Response]:
        """``method path`` on instance ``i`` or, when it fails to answer, on the next live one."""
        for k in range(len(self.clients)):
            j = (i + k) % len(self.clients)
            if j in self.dead:
                continue
            try:
                return j, self.clients[j].request(method, path, json=body)
            except httpx.TransportError:
                with self.lock:
                    self.dead.add(j)
                    self.retried += 1
        raise RuntimeError("no gateway answered")


def _session(fleet: Fleet, n: int, case: dict, questions: int) -> dict[str, Any]:
    start_on = n % 3
    _, r = fleet.send(start_on, "POST", "/v1/interviews", {"resume": case["resume"], "posting": case["posting"],
                                                           "kind": case["kind"], "questions": questions})
    r.raise_for_status()
    turn = r.json()
    sid = turn["id"]
    sent: dict[int, str] = {}
    answers = [case["answers"][0], case["short_answer"], *case["answers"][1:]]
    hop = start_on
    for k, text in enumerate(answers):
        question = turn["question"]
        if question is None:
            break
        hop += 1  # every turn on another instance
        text = f"{text} (세션 {n}, 답 {k + 1})"
        _, r = fleet.send(hop, "POST", f"/v1/interviews/{sid}/answers", {"answer": text, "turn": question["turn"]})
        if r.status_code != 200:
            return {"id": sid, "error": f"{r.status_code} {r.text[:200]}", "sent": sent}
        sent[question["turn"]] = text
        turn = r.json()
        with fleet.lock:
            fleet.turns_done += 1
    return {"id": sid, "sent": sent, "finished": turn["status"] == "finished"}


def instances(data: dict, sessions: int, questions: int = 3) -> dict[str, Any]:
    """Three gateways on one Redis, one killed mid-run: completed, lost, duplicated; then the refusals."""
    from bench.standin import ChatStandIn

    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-interviews-"))
    stand = ChatStandIn(_standin_reply)
    procs: list = []
    fleet = Fleet([], [])
    redis, url = start_redis(folder / "redis")
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", stand.url, "--backend-model", "standin")
        procs.append(rs)
        ports = []
        for _ in range(3):
            gw, port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}", "--redis-url", url)
            procs.append(gw)
            ports.append(port)
        fleet = Fleet(ports, procs)
        per_session = questions + 1  # one follow-up each (the short second answer)
        kill_after = sessions * per_session // 3
        killed: dict[str, Any] = {}

        def killer() -> None:
            while fleet.turns_done < kill_after:
                time.sleep(0.005)
            procs[2].send_signal(signal.SIGKILL)  # the second gateway (procs[0] is reasoning)
            killed["after_turns"] = fleet.turns_done

        t0 = time.perf_counter()
        threading.Thread(target=killer, daemon=True).start()
        cases = data["sessions"]
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda n: _session(fleet, n, cases[n % len(cases)], questions), range(sessions)))
        wall_s = time.perf_counter() - t0
        lost = duplicates = completed = 0
        errors = [r["error"] for r in results if "error" in r]
        for res in results:
            _, state_r = fleet.send(0, "GET", f"/v1/interviews/{res['id']}")
            state = state_r.json()
            recorded = {t["question"]["turn"]: t["answer"] for t in state["turns"]}
            turns = [t["question"]["turn"] for t in state["turns"]]
            duplicates += len(turns) - len(set(turns)) + sum(
                1 for turn, text in recorded.items() if text is not None and res["sent"].get(turn) != text)
            lost += sum(1 for turn, text in res["sent"].items() if recorded.get(turn) != text)
            completed += state["status"] == "finished" and res.get("finished", False)
        refusals = _refusals(fleet, data)
    finally:
        for p in procs:
            if p.poll() is None:
                stop_service(p)
        redis.terminate()
        stand.close()
        for c in fleet.clients:
            c.close()
    return {"sessions": sessions, "questions": questions, "instances": 3,
            "killed_after_turns": killed.get("after_turns"),
            "completed": completed, "answers_acknowledged": sum(len(r["sent"]) for r in results), "lost": lost,
            "duplicates": duplicates, "retried_on_another": fleet.retried, "errors": errors[:5],
            "wall_s": round(wall_s, 2), "refusals": refusals}


def _refusals(fleet: Fleet, data: dict) -> dict[str, int]:
    """The status of each bad request (on a live instance)."""
    case = data["sessions"][0]
    out = {}
    _, r = fleet.send(0, "POST", f"/v1/interviews/{'0' * 32}/answers", {"answer": "답변입니다"})
    out["unknown session"] = r.status_code
    _, r = fleet.send(0, "POST", "/v1/interviews", {"resume": case["resume"], "posting": case["posting"],
                                                    "questions": 1})
    sid = r.json()["id"]
    _, r = fleet.send(0, "POST", f"/v1/interviews/{sid}/report", {})
    out["report before any answer"] = r.status_code
    _, r = fleet.send(0, "POST", f"/v1/interviews/{sid}/answers", {"answer": ""})
    out["empty answer"] = r.status_code
    _, r = fleet.send(0, "POST", f"/v1/interviews/{sid}/answers", {"answer": "가" * 4001})
    out["over-long answer"] = r.status_code
    fleet.send(0, "POST", f"/v1/interviews/{sid}/answers", {"answer": case["answers"][0], "turn": 1})
    _, r = fleet.send(0, "POST", f"/v1/interviews/{sid}/answers", {"answer": "하나 더 말씀드리면 이렇습니다."})
    out["answer to a finished session"] = r.status_code
    return out


def run(parts: tuple[str, ...], sessions: int) -> dict[str, Any]:
    """The parts asked for."""
    data = json.loads(CASES.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    if "instances" in parts:
        random.seed(7)
        out["instances"] = instances(data, sessions)
    if not {"latency", "report", "ready"} & set(parts):
        return out
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-interviews-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    out["model"] = llm.model
    procs = []
    try:
        rs, rs_port = start_patient_reasoning(llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=900,
                          headers={"X-Request-Timeout-Ms": "600000"}) as http:
            if "ready" in parts:
                out["ready"] = ready(http, data["sessions"][0], data["sessions"][1]["answers"])
            if {"latency", "report"} & set(parts):
                lat = latency(http, data)
                out["latency"] = {**lat, "prepared_p50_ms": _p50(lat["prepared_ms"]),
                                  "follow_up_p50_ms": _p50(lat["follow_up_ms"]),
                                  "start_p50_ms": _p50(lat["start_ms"]), "immediate_p50_ms": _p50(lat["immediate_ms"]),
                                  "prepare_wait_p50_s": _p50(lat["prepare_wait_s"])}
            if "report" in parts:
                out["report"] = report(http, lat["sessions"][0])
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return out


def markdown(f: dict[str, Any]) -> list[str]:
    """The figures as tables."""
    lines: list[str] = []
    if "latency" in f:
        lat = f["latency"]
        lines += ["## Next question after an answer (the embedded model)", "", md_table(
            ["case", "n", "p50 ms", "target"],
            [["prepared (the answer sent once the next question was ready)", str(len(lat["prepared_ms"])),
              str(lat["prepared_p50_ms"]), "≤ 100"],
             ["follow-up (short answer: written after it)", str(len(lat["follow_up_ms"])), str(lat["follow_up_p50_ms"]),
              "—"],
             ["answered at once (waits for the preparation in flight)", str(len(lat["immediate_ms"])),
              str(lat["immediate_p50_ms"]), "—"],
             ["first question (POST /v1/interviews)", str(len(lat["start_ms"])), str(lat["start_p50_ms"]), "—"]]),
            "", f"Preparation took {lat['prepare_wait_p50_s']} s p50 (the wait before each answer); "
                f"next questions by source: {lat['sources']}.", ""]
    if "ready" in f:
        r = f["ready"]
        lines += ["## The report after the last answer", "", md_table(
            ["asked", "first event ms", "complete ms"],
            [["at once after the last answer (waits for its score)", str(r["after_last_answer"]["first_event_ms"]),
              str(r["after_last_answer"]["complete_ms"])],
             ["once every score is stored (gathers only)", str(r["after_every_score"]["first_event_ms"]),
              str(r["after_every_score"]["complete_ms"])],
             ["before: every answer scored when asked (`cache: false`)", "–",
              str(r["scoring_everything_at_report_ms"])]]), "",
            f"{r['answers']} answers; grade {r['grade']}, overall {r['overall']} (rescored: {r['overall_rescored']}); "
            f"the stored scores gathered twice are the same: {r['same_scores']}; answers scored from the "
            f"response cache: {sum(r.get('cached', []))}.", ""]
    if "report" in f:
        rep = f["report"]
        lines += ["## The same session scored twice (cache off)", "", md_table(
            ["answers", "identical scores", "overall (run 1, run 2)", "report ms (run 1, run 2)"],
            [[str(rep["answers"]), "yes" if rep["identical"] else "**no**", str(rep["overall"]),
              str(rep["report_ms"])]]), "", f"Criteria means: {rep['criteria_mean']}. Summary: {rep['summary']}", ""]
    if "instances" in f:
        ins = f["instances"]
        lines += ["## Three gateway instances, one killed (stand-in LLM)", "", md_table(
            ["sessions", "completed", "answers acknowledged", "lost", "duplicate turns", "retried on another",
             "killed after turn", "wall s"],
            [[str(ins["sessions"]), str(ins["completed"]), str(ins["answers_acknowledged"]), str(ins["lost"]),
              str(ins["duplicates"]), str(ins["retried_on_another"]), str(ins["killed_after_turns"]),
              str(ins["wall_s"])]]), "", "Refusals: " + ", ".join(f"{k} → {v}" for k, v in ins["refusals"].items()),
            ""]
        if ins["errors"]:
            lines += ["Errors: " + "; ".join(ins["errors"]), ""]
    return lines


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.interviews", description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    parser.add_argument("--sessions", type=int, default=24, help="sessions in the instances part [24]")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="results folder")
    parser.add_argument("--name", default="interviews", help="result file name [interviews]")
    args = parser.parse_args(argv)
    figures = run(tuple(p for p in args.parts.split(",") if p), args.sessions)
    body = ["- Processes on loopback: the embedded model (llama.cpp server, one slot, 2 threads) or the scripted "
            "stand-in (instances part), the reasoning service (RunTask) and gateways; sessions from "
            "bench/data/interviews_eval.json.", "", *markdown(figures)]
    write_result(args.name, "Mock interview sessions", body, figures, out=args.out,
                 command=command_line("bench.interviews", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
