"""Recommendation reasons: one LLM call per search query, whatever the number of items.

The answer is constrained by a JSON schema (the backend's grammar or structured output) and
validated here as well; an invalid answer gets one retry at temperature 0 with a stricter
instruction, then the call fails with InvalidOutput.

Every card's reasons then go through the checks of :mod:`services.reasoning.checks` (not a copy of the
item, nothing from another item, Korean, length, short and long distinct, no repeated phrase). The
failing cards are regenerated once, in one more call naming each card's violations; a card that
still fails is returned with ``status="failed"``, its violation kinds and no text, never passed on.
:meth:`ReasonWriter.stream` yields each passing card as soon as its JSON object closes (the first
card long before the answer ends), then the regenerated or failed ones.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import jsonschema
from prometheus_client import Counter

from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, InvalidInput, InvalidOutput, Violation
from services.reasoning.backends.base import GenerationParams
from services.reasoning.checks import VIOLATION_KINDS, CheckRules, Finding, check_reason
from services.reasoning.generation import Delta, Failed, Generator, Timeouts, Usage
from services.reasoning.prompts import reasons_messages, reasons_schema

MAX_ITEMS = 20
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 2000
TOKENS_PER_ITEM = 180  # short <= 50 and long <= 160 characters (the schema's caps) plus the JSON around them
MIN_REGENERATION_S = 1.0  # below this much of the total deadline left, failing cards are not regenerated
CARD_STATUSES = ("ok", "regenerated", "failed")
VIOLATIONS = Counter("mesh_reasoning_reason_violations", "reason cards that broke a check, per check "
                     "(first answers and regenerations)", ["kind"])
CARDS = Counter("mesh_reasoning_reason_cards", "reason cards returned, by status", ["status"])
for _kind in VIOLATION_KINDS:
    VIOLATIONS.labels(_kind)
for _status in CARD_STATUSES:
    CARDS.labels(_status)
log = logging.getLogger(__name__)
# (query, [(id, title, description)], strict_retry, notes per id) -> chat messages
PromptBuilder = Callable[[str, list[tuple[str, str, str]], bool, dict[str, list[str]] | None], list[dict[str, str]]]


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
    ``long`` are empty and ``violations`` names the kinds). Besides the check kinds, ``missing``: the
    streamed answer ended before it wrote this card, or wrote it without text (:meth:`ReasonWriter.stream`).
    """

    item_id: str
    short: str
    long: str
    status: str = "ok"
    violations: tuple[str, ...] = field(default=())


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


class CardScanner:
    """Finds the card objects of a ``{"reasons": [{...}, ...]}`` answer while it is still streaming."""

    def __init__(self) -> None:
        self.text = ""
        self.pos: int | None = None
        self.decoder = json.JSONDecoder()

    def feed(self, delta: str) -> list[dict]:
        """The card objects completed by ``delta``."""
        self.text += delta
        if self.pos is None:
            start = re.search(r'"reasons"\s*:\s*\[', self.text)
            if start is None:
                return []
            self.pos = start.end()
        out: list[dict] = []
        while True:
            i = self.pos
            while i < len(self.text) and self.text[i] in " \t\r\n,":
                i += 1
            if i >= len(self.text) or self.text[i] != "{":
                return out
            try:
                obj, end = self.decoder.raw_decode(self.text, i)
            except ValueError:  # not closed yet
                return out
            self.pos = end
            if isinstance(obj, dict):
                out.append(obj)


def _failed(item_id: str, findings: list[Finding]) -> ReasonOut:
    """A card returned without text: what its last answer broke, never the text itself."""
    return ReasonOut(item_id, "", "", "failed", tuple(sorted({f.kind for f in findings})))


@dataclass(frozen=True)
class _RedoPlan:
    """The one regeneration of failing cards, planned the same way streamed or not.

    ``notes`` name each card's violations for the prompt, ``first`` what each card first broke, and
    ``timeouts`` the deadlines left (None: too little of the total deadline is left to try).
    """

    notes: dict[str, list[str]]
    first: dict[str, tuple[str, ...]]
    timeouts: Timeouts | None

    @classmethod
    def of(cls, failing: dict[str, list[Finding]], timeouts: Timeouts, start: float) -> _RedoPlan:
        """The plan for ``failing`` (item id -> findings), ``start`` being when the request began."""
        left = timeouts.total_s - (time.perf_counter() - start)
        again = (Timeouts(min(timeouts.first_token_s, left), min(timeouts.generation_s, left), left)
                 if left >= MIN_REGENERATION_S else None)
        return cls({item_id: [f.detail for f in findings] for item_id, findings in failing.items()},
                   {item_id: tuple(sorted({f.kind for f in findings})) for item_id, findings in failing.items()},
                   again)


class ReasonWriter:
    """Writes reasons for one query per call, checks every card, regenerates the failing ones once."""

    def __init__(self, generator: Generator, rules: CheckRules | None = None,
                 prompt: PromptBuilder = reasons_messages) -> None:
        self.generator = generator
        self.rules = rules or CheckRules()
        self.prompt = prompt  # another builder only to compare prompts (bench.llm_select --prompts)

    def check(self, query: str, items: list[ItemIn], reasons: list[ReasonOut],
              subset: list[ItemIn] | None = None) -> dict[str, list[Finding]]:
        """Per item id, the checks its reasons break (failing ids only).

        ``reasons`` belong to ``subset`` (all ``items`` by default); every other item of ``items``
        counts as another item, so a regenerated card may not borrow from any card of the list.
        """
        out = {}
        for item, reason in zip(subset or items, reasons, strict=True):
            others = [(o.title, o.description) for o in items if o.id != item.id]
            findings = check_reason(reason.short, reason.long, title=item.title, description=item.description,
                                    query=query, others=others, rules=self.rules)
            for kind in {f.kind for f in findings}:
                VIOLATIONS.labels(kind).inc()
            if findings:
                out[item.id] = findings
        return out

    async def write(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                    timeouts: Timeouts) -> tuple[list[ReasonOut], Usage]:
        """One call (two when the first answer is invalid), one more for cards that fail the checks."""
        validate_request(query, items)
        start = time.perf_counter()
        total = Usage(llm_calls=0)
        reasons = await self._generate(query, items, max_tokens=max_tokens, temperature=temperature,
                                       timeouts=timeouts, total=total)
        failing = self.check(query, items, reasons)
        by_id = {r.item_id: r for r in reasons}
        by_id.update(await self._regenerate(query, items, failing, start=start, timeouts=timeouts,
                                            temperature=temperature, total=total))
        out = [by_id[item.id] for item in items]
        for r in out:
            CARDS.labels(r.status).inc()
        return out, total

    async def stream(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                     timeouts: Timeouts) -> AsyncIterator[ReasonOut | Usage]:
        """The same cards as :meth:`write`, each as soon as it is known, then the usage.

        A card that passes its checks is yielded the moment its JSON object closes in the stream; the
        cards that fail, or that the answer never completed, are regenerated in one more streamed call
        and each is yielded as its JSON object closes there (``regenerated``), the rest at its end
        (``failed``). The order is therefore not the items' order.
        """
        validate_request(query, items)
        start = time.perf_counter()
        total = Usage(llm_calls=0)
        failing: dict[str, list[Finding]] = {}
        failure: list[Failed] = []
        pending = {item.id: item for item in items}
        shown = 0
        async for item, reason in self._cards(query, items, pending, max_tokens=max_tokens, temperature=temperature,
                                              timeouts=timeouts, total=total, failure=failure):
            found = self.check(query, items, [reason], subset=[item]) if reason else \
                {item.id: [Finding("missing", "both", "short와 long을 모두 쓰세요")]}
            if found or reason is None:
                failing.update(found)
            else:
                shown += 1
                CARDS.labels("ok").inc()
                yield reason
        if failure and not shown and not failing:
            raise_for(failure[0])
        for item_id in pending:
            failing[item_id] = [Finding("missing", "both", "이 카드의 답이 없었습니다. 빠짐없이 쓰세요")]
        if not failing:
            yield total
            return
        plan = _RedoPlan.of(failing, timeouts, start)
        redo = {item.id: item for item in items if item.id in failing}
        if plan.timeouts is not None:
            failure.clear()
            try:
                async for item, reason in self._cards(query, items, redo, max_tokens=0, temperature=temperature,
                                                      timeouts=plan.timeouts, total=total, failure=failure,
                                                      notes=plan.notes):
                    found = self.check(query, items, [reason], subset=[item]) if reason else {}
                    failing.update(found)
                    if reason and not found:
                        CARDS.labels("regenerated").inc()
                        yield ReasonOut(item.id, reason.short, reason.long, "regenerated", plan.first[item.id])
                    else:
                        redo[item.id] = item  # not regenerated: failed below
            except (DeadlineExceeded, DependencyUnavailable) as err:
                log.info("regenerating %d reason cards failed: %s", len(redo), err)
            if failure:
                log.info("regenerating reason cards failed: %s", failure[0].message)
        for item in items:
            if item.id in redo:
                CARDS.labels("failed").inc()
                yield _failed(item.id, failing[item.id])
        yield total

    async def _cards(self, query: str, items: list[ItemIn], pending: dict[str, ItemIn], *, max_tokens: int,
                     temperature: float, timeouts: Timeouts, total: Usage, failure: list[Failed],
                     notes: dict[str, list[str]] | None = None) -> AsyncIterator[tuple[ItemIn, ReasonOut | None]]:
        """One streamed call for the ``pending`` items: each card as its JSON object closes.

        A card is popped from ``pending`` when it arrives (``None``: a field was empty), so what is left
        there afterwards was never written. A backend failure is appended to ``failure``.
        """
        rows = [(i.id, i.title, i.description) for i in items if i.id in pending]
        schema = reasons_schema([row[0] for row in rows], self.rules.short_chars[1], self.rules.long_chars[1])
        budget = max_tokens or min(2048, 64 + TOKENS_PER_ITEM * len(rows))
        messages = self.prompt(query, rows, False, notes)
        scanner = CardScanner()
        async for event in self.generator.stream(messages, GenerationParams(budget, temperature, schema), timeouts):
            if isinstance(event, Delta):
                for obj in scanner.feed(event.text):
                    item = pending.pop(str(obj.get("id")), None)
                    if item is None:
                        continue
                    short, long = obj.get("short"), obj.get("long")
                    if isinstance(short, str) and isinstance(long, str) and short.strip() and long.strip():
                        yield item, ReasonOut(item.id, short.strip(), long.strip())
                    else:
                        yield item, None
            else:
                total.llm_calls += 1
                self._add(total, event.usage)
                if isinstance(event, Failed):
                    failure.append(event)

    async def _regenerate(self, query: str, items: list[ItemIn], failing: dict[str, list[Finding]], *,
                          start: float, timeouts: Timeouts, temperature: float, total: Usage
                          ) -> dict[str, ReasonOut]:
        """The failing cards after one more call naming their violations: regenerated or failed."""
        if not failing:
            return {}
        plan = _RedoPlan.of(failing, timeouts, start)
        redo = [item for item in items if item.id in failing]
        second: dict[str, ReasonOut] = {}
        if plan.timeouts is not None:
            try:
                redone = await self._generate(query, redo, max_tokens=0, temperature=temperature,
                                              timeouts=plan.timeouts, total=total, notes=plan.notes)
            except (DeadlineExceeded, DependencyUnavailable, InvalidOutput) as err:
                log.info("regenerating %d reason cards failed: %s", len(redo), err)
            else:
                still = self.check(query, items, redone, subset=redo)
                second = {r.item_id: r for r in redone if r.item_id not in still}
                failing.update(still)
        return {item.id: (ReasonOut(item.id, second[item.id].short, second[item.id].long, "regenerated",
                                    plan.first[item.id]) if item.id in second else _failed(item.id, failing[item.id]))
                for item in redo}

    async def _generate(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                        timeouts: Timeouts, total: Usage, notes: dict[str, list[str]] | None = None
                        ) -> list[ReasonOut]:
        """Reasons that follow the schema, in one call (two when the first answer breaks it)."""
        ids = [item.id for item in items]
        schema = reasons_schema(ids, self.rules.short_chars[1], self.rules.long_chars[1])
        rows = [(i.id, i.title, i.description) for i in items]
        budget = max_tokens or min(2048, 64 + TOKENS_PER_ITEM * len(items))
        problem = ""
        for attempt in range(2):
            messages = self.prompt(query, rows, attempt > 0, notes)
            params = GenerationParams(budget, temperature if attempt == 0 else 0.0, schema)
            result = await self.generator.complete(messages, params, timeouts)
            total.llm_calls += 1
            self._add(total, result.usage)
            if isinstance(result, Failed):
                raise_for(result)
                return []  # unreachable: raise_for always raises
            parsed = parse_reasons(result.text, items, schema)
            if not isinstance(parsed, str):
                return parsed
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
