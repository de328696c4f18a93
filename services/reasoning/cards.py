"""Reason cards: the request's items and their validation, the answer per card, the card metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import Counter

from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, InvalidInput, Violation
from services.reasoning.checks import VIOLATION_KINDS, Finding
from services.reasoning.generation import Failed

MAX_ITEMS = 20
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 2000
TOKENS_PER_CARD = 160  # one card's answer: short <= 40 and long <= 90 characters (the schema's caps) and its JSON
MIN_REGENERATION_S = 1.0  # below this much of the total deadline left, failing cards are not regenerated
CARD_STATUSES = ("ok", "regenerated", "failed")
VIOLATIONS = Counter("mesh_reasoning_reason_violations", "reason cards that broke a check, per check "
                     "(first answers and regenerations)", ["kind"])
CARDS = Counter("mesh_reasoning_reason_cards", "reason cards returned, by status", ["status"])
for _kind in VIOLATION_KINDS:
    VIOLATIONS.labels(_kind)
for _status in CARD_STATUSES:
    CARDS.labels(_status)


@dataclass(frozen=True)
class ItemIn:
    """A search result to explain."""

    id: str
    title: str
    description: str = ""


@dataclass(frozen=True)
class ReasonOut:
    """Why one item fits the query.

    ``status``: ``ok`` (passed the checks at once), ``regenerated`` (passed after one regeneration;
    ``violations`` names what the first answer broke) or ``failed`` (still broke a check: ``short`` and
    ``long`` are empty, or code's factual reason with ``source`` "rule", and ``violations`` names the
    kinds). Besides the check kinds, ``missing``: the
    streamed answer ended before it wrote this card, or wrote it without text (:meth:`ReasonWriter.stream`).
    """

    item_id: str
    short: str
    long: str
    status: str = "ok"
    violations: tuple[str, ...] = field(default=())
    source: str = "model"  # "rule": written by code after the model's failed twice (services/reasoning/fallback.py)


def validate_request(query: str, items: list[ItemIn], field: str = "") -> None:
    """Reject empty queries, empty or oversized item lists, missing or duplicate ids."""
    violations = []
    if not query.strip():
        violations.append(Violation(f"{field}query", "empty"))
    if not 1 <= len(items) <= MAX_ITEMS:
        violations.append(Violation(f"{field}items", f"give 1..{MAX_ITEMS} items (got {len(items)})"))
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not item.id.strip():
            violations.append(Violation(f"{field}items[{i}].id", "empty"))
        elif item.id in seen:
            violations.append(Violation(f"{field}items[{i}].id", f"duplicate id {item.id!r}"))
        seen.add(item.id)
        if not item.title.strip():
            violations.append(Violation(f"{field}items[{i}].title", "empty"))
        elif len(item.title) > MAX_TITLE_CHARS:
            violations.append(Violation(f"{field}items[{i}].title", f"over {MAX_TITLE_CHARS} characters"))
        if len(item.description) > MAX_DESCRIPTION_CHARS:
            violations.append(Violation(f"{field}items[{i}].description",
                                        f"over {MAX_DESCRIPTION_CHARS} characters"))
    if violations:
        raise InvalidInput("invalid reasons request", violations)


def raise_for(failure: Failed) -> None:
    """A failed call as a domain error."""
    if failure.kind.endswith("timeout"):
        raise DeadlineExceeded(failure.message)
    raise DependencyUnavailable(failure.message)


def _failed(item_id: str, findings: list[Finding]) -> ReasonOut:
    """A card returned without text: what its last answer broke, never the text itself."""
    return ReasonOut(item_id, "", "", "failed", tuple(sorted({f.kind for f in findings})))
