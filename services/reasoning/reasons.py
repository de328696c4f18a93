"""Recommendation reasons: one LLM call per search query, whatever the number of items.

The answer is constrained by a JSON schema (the backend's grammar or structured output) and
validated here as well; an invalid answer gets one retry at temperature 0 with a stricter
instruction, then the call fails with InvalidOutput.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import jsonschema

from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, InvalidInput, InvalidOutput, Violation
from services.reasoning.backends.base import GenerationParams
from services.reasoning.generation import Failed, Generator, Timeouts, Usage
from services.reasoning.prompts import reasons_messages, reasons_schema

MAX_ITEMS = 20
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 2000
TOKENS_PER_ITEM = 160


@dataclass(frozen=True)
class ItemIn:
    """A search result to explain."""

    id: str
    title: str
    description: str = ""


@dataclass(frozen=True)
class ReasonOut:
    """Why one item fits the query."""

    item_id: str
    short: str
    long: str


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


def parse_reasons(text: str, items: list[ItemIn], schema: dict) -> list[ReasonOut] | str:
    """The reasons in the items' order, or why the answer is invalid."""
    try:
        data = json.loads(text)
        jsonschema.validate(data, schema)
    except (ValueError, jsonschema.ValidationError) as err:
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    by_id = {r["id"]: r for r in data["reasons"]}
    if set(by_id) != {item.id for item in items}:
        return "ids do not match the items one to one"
    out = [ReasonOut(item.id, by_id[item.id]["short"].strip(), by_id[item.id]["long"].strip()) for item in items]
    if any(not r.short or not r.long for r in out):
        return "blank reason"
    return out


def raise_for(failure: Failed) -> None:
    """A failed call as a domain error."""
    if failure.kind.endswith("timeout"):
        raise DeadlineExceeded(failure.message)
    raise DependencyUnavailable(failure.message)


class ReasonWriter:
    """Writes reasons for one query per call."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator

    async def write(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                    timeouts: Timeouts) -> tuple[list[ReasonOut], Usage]:
        """One call (two when the first answer is invalid)."""
        validate_request(query, items)
        ids = [item.id for item in items]
        schema = reasons_schema(ids)
        rows = [(i.id, i.title, i.description) for i in items]
        budget = max_tokens or min(2048, 64 + TOKENS_PER_ITEM * len(items))
        total = Usage(llm_calls=0)
        problem = ""
        for attempt in range(2):
            messages = reasons_messages(query, rows, strict_retry=attempt > 0)
            params = GenerationParams(budget, temperature if attempt == 0 else 0.0, schema)
            result = await self.generator.complete(messages, params, timeouts)
            total.llm_calls += 1
            self._add(total, result.usage)
            if isinstance(result, Failed):
                raise_for(result)
                return [], total  # unreachable: raise_for always raises
            parsed = parse_reasons(result.text, items, schema)
            if not isinstance(parsed, str):
                return parsed, total
            problem = parsed
        raise InvalidOutput(f"the model's reasons broke the schema twice: {problem}")

    @staticmethod
    def _add(total: Usage, usage: Usage) -> None:
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        total.ttft_ns = total.ttft_ns or usage.ttft_ns
        total.total_ns += usage.total_ns
        total.tokens_per_second = usage.tokens_per_second
        total.cost_usd += usage.cost_usd
        total.backend, total.model = usage.backend or total.backend, usage.model or total.model
        total.estimated = total.estimated or usage.estimated
        total.failed_over += usage.failed_over
