"""The quality gate of a model upgrade: judged queries run on the old and the new version before the swap.

The operator gives queries with the ids of the documents relevant to each (seed 000's baseline set);
both versions answer them in one search mode (dense by default: the leg a model change moves), and
the new version may replace the old only when its recall@10 and nDCG@10 are each at least the old
one's minus ``margin`` (2 points by default: seed 000 allows recall@10 to drop at most 2 points).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from services.bootstrap.errors import FailedPrecondition, InvalidInput, Violation

K = 10
DEFAULT_MARGIN = 0.02
MAX_QUERIES = 1000
MODES = ("dense", "hybrid", "keyword")


@dataclass(frozen=True)
class GateQuery:
    """One judged query."""

    query: str
    relevant_ids: tuple[str, ...]


@dataclass(frozen=True)
class Gate:
    """Judged queries, the margin and the mode both versions are searched in."""

    queries: tuple[GateQuery, ...]
    margin: float = DEFAULT_MARGIN
    mode: str = "dense"


@dataclass(frozen=True)
class GateResult:
    """Both versions' figures (means over the queries) and the verdict."""

    queries: int
    old_recall: float
    new_recall: float
    old_ndcg: float
    new_ndcg: float
    margin: float
    passed: bool
    old_revision: str
    new_revision: str

    def as_dict(self) -> dict[str, object]:
        """Plain values (the reindex stream's gate event)."""
        return asdict(self)

    def summary(self) -> str:
        """Both figures in one line."""
        return (f"recall@10 {self.new_recall:.4f} (new, {self.new_revision}) vs {self.old_recall:.4f} (old, "
                f"{self.old_revision}); nDCG@10 {self.new_ndcg:.4f} vs {self.old_ndcg:.4f}; margin "
                f"{self.margin:.4f} over {self.queries} queries")


class GateRefused(FailedPrecondition):
    """The new version scored below the old one by more than the margin: nothing was swapped."""


def check_gate(gate: Gate) -> list[Violation]:
    """Every problem of a gate's shape (the documents are checked against the collection separately)."""
    bad: list[Violation] = []
    if not 1 <= len(gate.queries) <= MAX_QUERIES:
        bad.append(Violation("gate.queries", f"between 1 and {MAX_QUERIES} judged queries"))
    for i, q in enumerate(gate.queries[:MAX_QUERIES]):
        if not q.query.strip():
            bad.append(Violation(f"gate.queries[{i}].query", "required"))
        if not q.relevant_ids or any(not d.strip() for d in q.relevant_ids):
            bad.append(Violation(f"gate.queries[{i}].relevant_ids", "at least one non-empty document id"))
    if not (math.isfinite(gate.margin) and 0 <= gate.margin <= 1):
        bad.append(Violation("gate.margin", "between 0 and 1 (0.02 = 2 points)"))
    if gate.mode not in MODES:
        bad.append(Violation("gate.mode", f"one of {', '.join(MODES)}"))
    return bad


def unknown_documents(gate: Gate, known: set[str]) -> list[Violation]:
    """A violation per judged id the collection does not hold (a gate over missing documents measures nothing)."""
    return [Violation(f"gate.queries[{i}].relevant_ids[{j}]", f"document {d!r} is not in the collection")
            for i, q in enumerate(gate.queries) for j, d in enumerate(q.relevant_ids) if d not in known]


def recall_at(ranked: list[str], relevant: set[str], k: int = K) -> float:
    """Share of the relevant documents among the first ``k``."""
    return len(set(ranked[:k]) & relevant) / len(relevant)


def ndcg_at(ranked: list[str], relevant: set[str], k: int = K) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1.0 / math.log2(rank + 2) for rank, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(k, len(relevant))))
    return dcg / ideal


async def judge(gate: Gate, old: Callable[[str], Awaitable[list[str]]], new: Callable[[str], Awaitable[list[str]]],
                old_revision: str, new_revision: str) -> GateResult:
    """Run every judged query on both versions (``old``/``new``: a query -> ranked document ids)."""
    sums = [0.0, 0.0, 0.0, 0.0]
    for q in gate.queries:
        relevant = set(q.relevant_ids)
        before, after = await old(q.query), await new(q.query)
        for i, value in enumerate((recall_at(before, relevant), recall_at(after, relevant),
                                   ndcg_at(before, relevant), ndcg_at(after, relevant))):
            sums[i] += value
    n = len(gate.queries)
    old_recall, new_recall, old_ndcg, new_ndcg = (v / n for v in sums)
    eps = 1e-9  # equal figures pass whatever the float sums' last bits
    passed = new_recall >= old_recall - gate.margin - eps and new_ndcg >= old_ndcg - gate.margin - eps
    return GateResult(n, old_recall, new_recall, old_ndcg, new_ndcg, gate.margin, passed, old_revision, new_revision)


def invalid(bad: list[Violation]) -> InvalidInput:
    """The error a bad gate or upgrade request is answered with."""
    return InvalidInput(f"invalid reindex: {bad[0].field}: {bad[0].description}"
                        + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""), bad)
