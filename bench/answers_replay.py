"""Stored answers re-checked by today's question checks, no LLM: how a rule change moves a run already made.

    python -m bench.answers_replay --questions-file bench/data/answers_near_c.json \
        --results bench/results/answers_near_c.json

Each answer the run kept (``reason: answered``) is re-checked by :func:`gateway.answers.question.mismatch`
against the passages it cited (title and text as the evidence and its passage) and the whole collection
as the passages found (the run's own found set is not stored: the whole collection stands for it, so the
"held elsewhere" rule reads a little wider than in the gateway). Printed: answerable and unanswerable
answers it now refuses, and the unanswerable ones still kept. Used to shape issue 78's rules on splits
already reported (C, D, answers-ko); never a figure for a split a rule was not written before.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gateway.answers import question


def replay(data: dict, results: dict) -> dict[str, list[str]]:
    """Question ids by outcome: ``answerable_refused``, ``unanswerable_refused``, ``unanswerable_kept``."""
    passages = {p["id"]: f"{p.get('title', '')} {p['text']}" for p in data["passages"]}
    questions = {q["id"]: q for q in data["questions"]}
    found = " ".join(passages.values())
    out: dict[str, list[str]] = {"answerable_refused": [], "unanswerable_refused": [], "unanswerable_kept": []}
    for answer in results["sets"][data["name"]]["answers"]:
        if answer["reason"] != "answered":
            continue
        q = questions[answer["id"]]
        cited = " ".join(passages[c] for c in dict.fromkeys(answer["cited"]) if c in passages)
        refused = question.mismatch(question.read(q["question"]), answer["answer"], cited, cited, found)
        if q["answerable"]:
            if refused:
                out["answerable_refused"].append(f"{q['id']} {refused}: {q['question']}")
        else:
            out["unanswerable_refused" if refused else "unanswerable_kept"].append(f"{q['id']}: {q['question']}")
    return out


def main() -> None:
    """Replay one stored run and print what today's checks change."""
    parser = argparse.ArgumentParser(prog="python -m bench.answers_replay", description=__doc__.split("\n")[0])
    parser.add_argument("--questions-file", type=Path, required=True, help="the set the run answered")
    parser.add_argument("--results", type=Path, required=True, help="the run's JSON under bench/results")
    args = parser.parse_args()
    data = json.loads(args.questions_file.read_text(encoding="utf-8"))
    outcome = replay(data, json.loads(args.results.read_text(encoding="utf-8")))
    run = {a["id"] for a in json.loads(args.results.read_text(encoding="utf-8"))["sets"][data["name"]]["answers"]}
    unanswerable = sum(1 for q in data["questions"] if not q["answerable"] and q["id"] in run)
    answered_before = len(outcome["unanswerable_refused"]) + len(outcome["unanswerable_kept"])
    print(f"{data['name']}: of {unanswerable} unanswerable, {unanswerable - answered_before} refused by the run, "
          f"{len(outcome['unanswerable_refused'])} more by today's checks, {len(outcome['unanswerable_kept'])} kept; "
          f"answerable answers now refused: {len(outcome['answerable_refused'])}")
    for key, rows in outcome.items():
        for row in rows:
            print(f"  {key}: {row}")


if __name__ == "__main__":
    main()
