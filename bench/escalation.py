"""Cheap model first: grounded answers on the 0.5B, escalated to the 1.5B when code refuses the answer.

    python -m bench.escalation [--limit 16]

Processes on loopback: embedding and retrieval (answers-ko ingested), two llama-servers — the
embedded Qwen2.5-Coder-0.5B (``small``) and 1.5B (``large``), Q4, two threads each, one at work at a
time — each behind its own reasoning service, and one gateway with three model routes: ``small``
(escalating to ``large``), ``small-only`` (the same instance, no escalation) and ``large``. Every
question of the answers-ko **eval** split (evenly spaced, ``--limit``) is asked on each route,
cache off. Reported per route: answerable questions answered with the key span (correctness, as
bench/answers.py scores it), unanswerable ones refused, escalation rate, tokens per question by
model, latency p50. No figure here was used to choose anything.

Cost: an illustrative price table (USD per 1M tokens, small:large 1:4, stated in the result) turns the
measured tokens into cost per question.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.answers import SLOW, ingest, load_answers_ko, squash
from bench.common import free_port, md_table, start_patient_reasoning, start_retrieval_pair, start_service, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server
from services.runtime.models import current_model_dir

SMALL, LARGE = "qwen2.5-coder-0.5b-instruct-q4", "qwen2.5-coder-1.5b-instruct-q4"
PRICES = {SMALL: (0.05, 0.20), LARGE: (0.20, 0.80)}  # illustrative USD per 1M tokens (prompt, completion)
ROUTES = ("small-only", "large", "small")


def ask(http: httpx.Client, q: dict, route: str) -> dict:
    """One question on ``route`` (cache off); the response with ``_ms``, or ``{"error"}``."""
    t = time.perf_counter()
    r = http.post("/v1/answers", json={"collection": "answers-ko", "question": q["question"], "model": route,
                                       "cache": False})
    out = r.json() if r.status_code == 200 else {"error": r.text[:300]}
    out["_ms"] = (time.perf_counter() - t) * 1e3
    return out


def usages(a: dict) -> list[dict]:
    """Every LLM usage behind a response: the refused call's and the answering one's."""
    found = [a.get("usage"), (a.get("escalation") or {}).get("usage")]
    return [u for u in found if u]


def cost(u: dict, model: str) -> float:
    """The illustrative price of one usage."""
    p, c = PRICES[model]
    return (u["prompt_tokens"] * p + u["completion_tokens"] * c) / 1e6


def figures(questions: list[dict], answers: list[dict], models: dict[str, str]) -> dict[str, Any]:
    """Correctness, refusals, escalations, tokens and cost of one route's answers."""
    ans = [(q, a) for q, a in zip(questions, answers, strict=True) if q["answerable"]]
    unans = [(q, a) for q, a in zip(questions, answers, strict=True) if not q["answerable"]]
    right = sum("error" not in a and a["answerable"] and squash(q["answer"]) in squash(a["answer"]) for q, a in ans)
    refused = sum("error" not in a and not a["answerable"] for _, a in unans)
    tokens: dict[str, int] = {}
    spend = 0.0
    for a in answers:
        for u in usages(a):
            # The instance is the reasoning service (host:port) that served the call; each serves one model.
            model = models.get(u["instance"].rsplit(":", 1)[-1], LARGE)
            tokens[model] = tokens.get(model, 0) + u["prompt_tokens"] + u["completion_tokens"]
            spend += cost(u, model)
    return {"answerable_right": f"{right}/{len(ans)}", "right_share": right / max(1, len(ans)),
            "unanswerable_refused": f"{refused}/{len(unans)}",
            "escalated": sum(bool(a.get("escalation")) for a in answers),
            "escalated_by_reason": {r: sum((a.get("escalation") or {}).get("reason") == r for a in answers)
                                    for r in ("unsupported", "invalid_output")},
            "answered_by": {r: sum(a.get("answered_by") == r for a in answers) for r in ("small", "large",
                                                                                      "small-only")},
            "errors": sum("error" in a for a in answers),
            "tokens_per_question": {m: round(t / len(answers), 1) for m, t in tokens.items()},
            "cost_per_question_usd": spend / len(answers),
            "ms_p50": statistics.median(a["_ms"] for a in answers)}


def main() -> None:
    """Run every route over the questions and write bench/results/escalation.md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=16, help="eval questions, evenly spaced (0: all)")
    args = ap.parse_args()
    passages, qs = load_answers_ko("eval")
    qs = [q for q in qs if not q.get("history")]
    if args.limit and args.limit < len(qs):
        qs = [qs[i * len(qs) // args.limit] for i in range(args.limit)]
    folder = Path(tempfile.mkdtemp(prefix="mesh-bench-esc-"))
    procs: list = []
    llms: list = []
    try:
        emb_port, ret_port = start_retrieval_pair(folder, current_model_dir().resolve(), procs)
        targets = {}
        for name in (SMALL, LARGE):
            llm = start_llm_server(free_port(), model=name, log_path=folder / f"{name}.log")
            llms.append(llm)
            rs, rs_port = start_patient_reasoning(llm.base_url)
            procs.append(rs)
            targets[name] = f"127.0.0.1:{rs_port}"
        models = {targets[SMALL].rsplit(":", 1)[-1]: SMALL, targets[LARGE].rsplit(":", 1)[-1]: LARGE}
        routes = {"small": {"targets": targets[SMALL], "escalate": "large"},
                  "small-only": {"targets": targets[SMALL]}, "large": {"targets": targets[LARGE]}}
        gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target",
                                    f"127.0.0.1:{ret_port}", "--model-routes", json.dumps(routes),
                                    "--default-model-route", "small", *SLOW)
        procs.append(gw)
        results: dict[str, list[dict]] = {r: [] for r in ROUTES}
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=900) as http:
            ingest(http, "answers-ko", passages)
            for i, q in enumerate(qs):
                for route in ROUTES:
                    a = ask(http, q, route)
                    results[route].append(a)
                    print(f"[bench] {i + 1}/{len(qs)} {q['id']} {route}: "
                          f"{'error' if 'error' in a else a.get('reason')} by {a.get('answered_by')} "
                          f"({a['_ms']:.0f} ms)", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        for llm in llms:
            llm.stop()
        shutil.rmtree(folder, ignore_errors=True)
    report(qs, results, models)


def report(qs: list[dict], results: dict[str, list[dict]], models: dict[str, str]) -> None:
    """Figures per route; bench/results/escalation.{md,json}."""
    per_route = {r: figures(qs, results[r], models) for r in ROUTES}
    label = {"small-only": "0.5B only", "large": "1.5B only", "small": "0.5B → 1.5B on a refusal"}
    body = [f"answers-ko eval split, {len(qs)} single-turn questions ({sum(q['answerable'] for q in qs)} "
            f"answerable), each asked on every route with the cache off. Models: {SMALL} and {LARGE} "
            "(llama-server, 2 threads). Correctness: the gold key span in the answer.", "",
            md_table(["route", "answerable right", "unanswerable refused", "escalated", "answered by 1.5B",
                      "tokens / question (0.5B, 1.5B)", "cost / question (illustrative)", "p50"],
                     [[label[r], f["answerable_right"], f["unanswerable_refused"], f"{f['escalated']}/{len(qs)}",
                       str(f["answered_by"]["large"]),
                       f"{f['tokens_per_question'].get(SMALL, 0):.0f}, {f['tokens_per_question'].get(LARGE, 0):.0f}",
                       f"${f['cost_per_question_usd'] * 1e3:.4f} per 1k", f"{f['ms_p50'] / 1e3:.1f} s"]
                      for r, f in per_route.items()]), "",
            f"Prices (illustrative, USD per 1M prompt/completion tokens): {json.dumps(PRICES)}.", "",
            "Latency is indicative only: the cascade's 0.5B call finds the prompt the 0.5B-only call cached, and "
            "the run may share the cores; tokens and correctness are not affected (deterministic decoding). Per "
            "question: the JSON's `answers`."]
    print(write_result("escalation", "Cheap model first, escalated on a refusal by code", body,
                       {"questions": [q["id"] for q in qs], "routes": per_route, "prices": PRICES,
                        "answers": {r: [{k: v for k, v in a.items() if k in ("answerable", "answer", "reason",
                                                                           "answered_by", "escalation", "usage",
                                                                           "_ms", "error")}
                                        for a in results[r]] for r in ROUTES}},
                       command=command_line("bench.escalation")))




if __name__ == "__main__":
    main()
