"""One mock interview session as stored: its hash read back, its plan of questions, its grade.

Pure functions and data, no store: :class:`Session` is what gateway/interviews/sessions.py reads from a
session's hash (meta, questions, answers, prepared questions, scores), and what it decides from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gateway.http.errors import ApiError

# The overall grade by the mean of the answers' overall scores (1-10); set before any evaluation.
GRADES = ((8.5, "A"), (7.0, "B"), (5.5, "C"), (4.0, "D"), (0.0, "F"))


def late() -> ApiError:
    """The report's deadline passed while a score was being written."""
    return ApiError(504, "deadline_exceeded", "the report's deadline passed before every answer was scored; the "
                                              "scores written are kept: ask again", retryable=True)


def grade(overall: float) -> str:
    """The letter of an overall mean (:data:`GRADES`)."""
    return next(letter for bound, letter in GRADES if overall >= bound)


def state_unavailable(err: Exception) -> ApiError:
    """The session store did not answer: the request fails (an interview's state is never guessed)."""
    return ApiError(503, "unavailable", f"the interview store did not answer ({err})", retryable=True)


@dataclass
class Session:
    """One session as read from its hash."""

    id: str
    meta: dict
    questions: dict[int, dict] = field(default_factory=dict)
    answers: dict[int, str] = field(default_factory=dict)
    prepared: dict[int, dict] = field(default_factory=dict)
    scores: dict[int, dict] = field(default_factory=dict)  # turn -> {"result": answer_feedback's, "cached"}

    @classmethod
    def parse(cls, sid: str, fields: dict[str, str]) -> Session:
        """The session in ``fields`` (the hash's)."""
        s = cls(sid, json.loads(fields["meta"]))
        for name, raw in fields.items():
            kind, _, n = name.partition(":")
            if kind == "q":
                s.questions[int(n)] = json.loads(raw)
            elif kind == "a":
                s.answers[int(n)] = json.loads(raw)["text"]
            elif kind == "prep":
                s.prepared[int(n)] = json.loads(raw)
            elif kind == "s":
                s.scores[int(n)] = json.loads(raw)
        return s

    @property
    def last(self) -> int:
        """The latest turn asked."""
        return max(self.questions, default=0)

    def plan_after(self, turn: int, follow_up_below: int) -> tuple[bool, int] | None:
        """What follows the answer to ``turn``: (follow-up?, main question), or None when the session ends."""
        q = self.questions[turn]
        if not q["follow_up"] and len(self.answers[turn].strip()) < follow_up_below:
            return True, q["main"]
        if q["main"] < self.meta["questions"]:
            return False, q["main"] + 1
        return None

    def finished(self, follow_up_below: int) -> bool:
        """The last turn is answered and nothing follows it."""
        return self.last in self.answers and self.plan_after(self.last, follow_up_below) is None

    def history(self) -> list[dict]:
        """The last three answered question-answer pairs, oldest first."""
        done = [n for n in sorted(self.answers) if n in self.questions]
        return [{"question": self.questions[n]["text"], "answer": self.answers[n]} for n in done[-3:]]

    def asked(self) -> list[str]:
        """Every question asked, in order."""
        return [self.questions[n]["text"] for n in sorted(self.questions)][-40:]
