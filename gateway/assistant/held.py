"""What an assistant session already holds, and whether a reply rests on it (checked by code).

Each kept turn records its **evidence**: a tool's result (a backend tool's JSON, a declared task's
output) as ``key: value`` lines, or a search's checked answer with the sentences it cites. A follow-up
("방금 찾은 공고 회사 이름이 뭐였지?", "그 면접 몇 시라고 했지?") is answered from it: the model sees the last
turns' evidence in its conversation, replies, and code keeps the reply only when that evidence holds it —
the rules of gateway/answers/support.py on the session's lines instead of retrieved passages:

- every number of the reply that the message does not write itself is in the evidence, as a value with
  its unit ("오후 2시" is held by ``2026-12-16T14:00``, which is read as 2026년 12월 16일 오후 2시);
- most of the reply's content terms (:data:`support.MIN_ANSWER_TERMS`) are in the evidence or echo the
  message ("그 회사" names what the person asked about, not a claim);
- a reply that says nothing of its own ("네, 맞아요") affirms the message: every term of it must be there;
- the reply is of the type the message asks (gateway/answers/question.py: 몇 시 → a time, 어디 → a name).

The search-only rule (b) — the evidence must hold a term of the question that tells passages apart —
does not apply: a follow-up names its subject by pointing at the earlier turn ("그 면접"), and the evidence
is chosen by the conversation, not by a search. Anything the evidence does not hold goes to search as before.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from gateway.answers import question as asked_of
from gateway.answers import support

EVIDENCE_CHARS = 600  # one turn's evidence as kept and shown to the model
EVIDENCE_TURNS = 2  # the latest turns whose evidence the model sees (each costs input tokens)


def _when(value: str) -> str | None:
    """An ISO 8601 date-time as Korean reads it ("2026년 12월 16일 오후 2시"), or None when it is not one."""
    if len(value) < 10 or value[4:5] != "-":
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    day = f"{moment.year}년 {moment.month}월 {moment.day}일"
    if len(value) <= 10:
        return day
    half = "오전" if moment.hour < 12 else "오후"
    hour = moment.hour % 12 or 12
    return f"{day} {half} {hour}시" + (f" {moment.minute}분" if moment.minute else "")


def _lines(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        if value and all(not isinstance(v, dict | list) for v in value.values()):  # one record on one line
            return [" · ".join(f"{k}: {_scalar(v)}" for k, v in value.items())]
        return [line for k, v in value.items() for line in _lines(v, f"{path}{k}.")]
    if isinstance(value, list):
        return [line for v in value for line in _lines(v, path)]
    return [f"{path.rstrip('.')}: {_scalar(value)}" if path else _scalar(value)]


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        when = _when(value)
        return f"{value} ({when})" if when else value
    return json.dumps(value, ensure_ascii=False)


def of_result(result: Any) -> str:
    """A tool's result as evidence lines (records one per line, dates also in Korean), cut at ``EVIDENCE_CHARS``."""
    text = "\n".join(_lines(result))
    return text[:EVIDENCE_CHARS]


def of_answer(answer: str, cited: list[str]) -> str:
    """A checked search answer and the sentences it cites, cut at ``EVIDENCE_CHARS``."""
    return "\n".join([answer, *dict.fromkeys(" ".join(s.split()) for s in cited)])[:EVIDENCE_CHARS]


def latest(turns: dict[int, dict], n: int = EVIDENCE_TURNS) -> list[str]:
    """The evidence of the session's latest ``n`` turns that hold any, oldest first."""
    held = [turns[k]["evidence"] for k in sorted(turns) if turns[k].get("evidence")]
    return held[-n:]


def check(reply: str, message: str, evidence: list[str]) -> str | None:
    """Why the session's evidence does not hold ``reply`` to ``message`` (None: it does).

    Reasons as support.check names them: ``no_evidence``, ``number_not_in_evidence``,
    ``answer_not_in_evidence``, ``answer_type``.
    """
    if not evidence or not reply.strip():
        return "no_evidence"
    text = "\n".join(evidence)
    haystack, written = support.squash(text), set(support.numbers(text))
    asked_here = support.squash(message)
    said = set(support.numbers(message))
    new_numbers = [n for n in support.numbers(reply) if not support.holds_number(n, said)]
    if any(not support.holds_number(n, written) for n in new_numbers):
        return "number_not_in_evidence"
    new_terms = [t for t in support.terms(reply) if not support.present(t, asked_here)]
    if new_terms:
        share = sum(support.present(t, haystack) for t in new_terms) / len(new_terms)
        if share < support.MIN_ANSWER_TERMS:
            return "answer_not_in_evidence"
    elif not new_numbers:  # "네, 맞아요": what it affirms (the message) must be in the evidence
        claim = support.terms(message)
        if not claim or not all(support.present(t, haystack) for t in claim):
            return "answer_not_in_evidence"
        if any(not support.holds_number(n, written) for n in said):
            return "number_not_in_evidence"
    if not asked_of.of_type(asked_of.read(message), reply):
        return "answer_type"
    return None
