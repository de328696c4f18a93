"""Recommendation reasons: one short LLM call per card, the query's cards in order (or ``parallel`` at once).

Each call sees the query and one item only, so the model cannot borrow another card's facts, and a
card is known as soon as its own call ends, not when the whole list's answer does
(bench/results/reasons.md). The system text and worked examples are the same for every call and the
query comes first in the last turn, so the serving engine's prefix cache leaves only the item's lines
to read per card. The answer is constrained by a JSON schema (the backend's grammar or
structured output) and validated here as well.

Every card's reasons go through the checks of :mod:`services.reasoning.checks` (not a copy of the
item, nothing from another item, Korean, length, short and long distinct, no repeated phrase). The
failing cards are regenerated once, each in its own call naming its violations; a card that still
fails is returned with ``status="failed"`` and its violation kinds, never with the failing text: with
code's short factual reason (``source="rule"``, services/reasoning/fallback.py) by default.
:meth:`ReasonWriter.stream` yields each passing card as soon as its call ends, then the regenerated
or failed ones.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import jsonschema

from services.reasoning.backends.base import GenerationParams
from services.reasoning.cards import (
    CARDS,
    MIN_REGENERATION_S,
    TOKENS_PER_CARD,
    VIOLATIONS,
    ItemIn,
    ReasonOut,
    _failed,
    raise_for,
    validate_request,
)
from services.reasoning.checks import CheckRules, Finding, check_reason
from services.reasoning.fallback import rule_reason
from services.reasoning.generation import Failed, Generator, Timeouts, Usage, add_usage
from services.reasoning.prompts import LONG_CAP, SHORT_CAP, reason_messages, reason_schema
from services.reasoning.substance import apart_words, same_reason, substance

log = logging.getLogger(__name__)
# (query, title, description, notes) -> chat messages of one card's call
PromptBuilder = Callable[[str, str, str, list[str] | None], list[dict[str, str]]]
MISSING = "이 카드의 답이 없었습니다. short와 long을 모두 쓰세요"


@dataclass(frozen=True)
class _RedoPlan:
    """The one regeneration of failing cards.

    ``notes`` name each card's violations for the prompt, ``first`` what each card first broke.
    """

    notes: dict[str, list[str]]
    first: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, failing: dict[str, list[Finding]]) -> _RedoPlan:
        """The plan for ``failing`` (item id -> findings)."""
        return cls({item_id: [f.detail for f in findings] for item_id, findings in failing.items()},
                   {item_id: tuple(sorted({f.kind for f in findings})) for item_id, findings in failing.items()})


@dataclass
class _Calls:
    """What one request's card calls share: the deadline's start, the usage so far, the backend failures."""

    query: str
    items: list[ItemIn]
    max_tokens: int
    temperature: float
    timeouts: Timeouts
    model: str
    start: float
    total: Usage
    failures: list[Failed]

    def left(self) -> Timeouts | None:
        """The deadlines of the next call (its stages, the total what is left), or None when too little is left."""
        left = self.timeouts.total_s - (time.perf_counter() - self.start)
        if left < MIN_REGENERATION_S:
            return None
        return Timeouts(min(self.timeouts.first_token_s, left), min(self.timeouts.generation_s, left), left)


class ReasonWriter:
    """Writes each card's reasons in its own call, checks every card, regenerates the failing ones once."""

    def __init__(self, generator: Generator, rules: CheckRules | None = None,
                 prompt: PromptBuilder = reason_messages, *, rule_reasons: bool = True, parallel: int = 1) -> None:
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        self.generator = generator
        self.rule_reasons = rule_reasons  # a failed card gets code's factual reason (source "rule")
        self.rules = rules or CheckRules()
        self.prompt = prompt  # another builder only to compare prompts (bench.llm_select --prompts)
        # Card calls at once: 1 for a one-slot server (the embedded llama.cpp), its slots for vLLM or an API.
        self.parallel = parallel

    def _caps(self) -> tuple[int, int]:
        """The answer's length caps: the prompt's targets with room, never past the checks' bounds.

        They bound the output tokens (a grammar-constrained backend cannot run past them); the checks'
        own bounds (``CheckRules``) are unchanged.
        """
        return min(SHORT_CAP, self.rules.short_chars[1]), min(LONG_CAP, self.rules.long_chars[1])

    def _fallback(self, query: str, item: ItemIn, findings: list[Finding], items: list[ItemIn]) -> ReasonOut:
        """A card whose reason failed twice: code's factual reason (``rule_reasons``) or none."""
        failed = _failed(item.id, findings)
        others = [o for o in items if o.id != item.id]
        return rule_reason(query, item, failed.violations, others) if self.rule_reasons else failed

    def check(self, query: str, items: list[ItemIn], reasons: list[ReasonOut],
              subset: list[ItemIn] | None = None, shown: list[str] | None = None) -> dict[str, list[Finding]]:
        """Per item id, the checks its reasons break (failing ids only).

        ``reasons`` belong to ``subset`` (all ``items`` by default); every other item of ``items``
        counts as another item, so a card may not borrow from any card of the list. ``shown``: the short
        reasons already on the screen (a card may not repeat one).
        """
        out = {}
        for item, reason in zip(subset or items, reasons, strict=True):
            others = [(o.title, o.description) for o in items if o.id != item.id]
            findings = check_reason(reason.short, reason.long, title=item.title, description=item.description,
                                    query=query, others=others, rules=self.rules)
            if not findings:  # the form holds: then whether it says something (issue 81)
                findings = substance(reason.short, reason.long, title=item.title, description=item.description,
                                     query=query, others=others)
            if not findings and (twin := same_reason(reason.short, shown or [])):
                findings = [twin]
            for kind in {f.kind for f in findings}:
                VIOLATIONS.labels(kind).inc()
            if findings:
                out[item.id] = findings
        return out

    async def write(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                    timeouts: Timeouts, model: str = "") -> tuple[list[ReasonOut], Usage]:
        """Every card in the items' order, and the usage of all calls."""
        got: dict[str, ReasonOut] = {}
        usage = Usage(llm_calls=0)
        async for event in self.stream(query, items, max_tokens=max_tokens, temperature=temperature,
                                       timeouts=timeouts, model=model):
            if isinstance(event, ReasonOut):
                got[event.item_id] = event
            else:
                usage = event
        return [got[item.id] for item in items], usage

    async def stream(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                     timeouts: Timeouts, model: str = "") -> AsyncIterator[ReasonOut | Usage]:
        """Each card as soon as it is known, then the usage.

        A card that passes its checks is yielded when its call ends; the cards that fail, or whose call
        failed, are regenerated once (each in its own call, naming what it broke) and yielded as those
        calls end (``regenerated``), the rest at the end (``failed``). The order is therefore not the
        items' order. When every first call failed at the backend (nothing written), the failure is raised.
        """
        validate_request(query, items)
        calls = _Calls(query, items, max_tokens, temperature, timeouts, model, time.perf_counter(),
                       Usage(llm_calls=0), [])
        failing: dict[str, list[Finding]] = {}
        written = 0
        shown: list[str] = []
        async for item, reason in self._cards(calls, items):
            written += reason is not None
            found = self.check(query, items, [reason], subset=[item], shown=shown) if reason else \
                {item.id: [Finding("missing", "both", MISSING)]}
            if found or reason is None:
                failing.update(found)
            else:
                CARDS.labels("ok").inc()
                shown.append(reason.short)
                yield reason
        if not written and calls.failures:
            raise_for(calls.failures[0])
        if failing:
            plan = _RedoPlan.of(failing)
            redo = [item for item in items if item.id in failing]
            async for item, reason in self._cards(calls, redo, plan.notes):
                found = self.check(query, items, [reason], subset=[item], shown=shown) if reason else {}
                if reason and not found:
                    del failing[item.id]
                    CARDS.labels("regenerated").inc()
                    shown.append(reason.short)
                    yield ReasonOut(item.id, reason.short, reason.long, "regenerated", plan.first[item.id])
                else:
                    failing[item.id] = found.get(item.id) or failing[item.id]
            for item in redo:
                if item.id in failing:
                    CARDS.labels("failed").inc()
                    yield self._fallback(query, item, failing[item.id], items)
        yield calls.total

    async def _cards(self, calls: _Calls, items: list[ItemIn], notes: dict[str, list[str]] | None = None
                     ) -> AsyncIterator[tuple[ItemIn, ReasonOut | None]]:
        """One call per item, ``parallel`` at once, each card as its call ends (``None``: no valid answer).

        Leaving early (the client went away) cancels the calls still running or waiting.
        """
        gate = asyncio.Semaphore(self.parallel)

        async def one(item: ItemIn) -> tuple[ItemIn, ReasonOut | None]:
            async with gate:  # FIFO: with parallel 1 the cards are written in the items' order
                return item, await self._card(calls, item, (notes or {}).get(item.id))

        tasks = [asyncio.ensure_future(one(item)) for item in items]
        try:
            for done in asyncio.as_completed(tasks):
                yield await done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _card(self, calls: _Calls, item: ItemIn, notes: list[str] | None) -> ReasonOut | None:
        """One item's call: its reasons, or None when the call failed or its answer was not valid."""
        timeouts = calls.left()
        if timeouts is None:
            return None
        schema = reason_schema(*self._caps())
        others = [(o.title, o.description) for o in calls.items if o.id != item.id]
        apart = apart_words(item.title, item.description, others, calls.query)
        description = f"{item.description}, 다른 상품에 없는 점: {'/'.join(apart)}" if apart else item.description
        messages = self.prompt(calls.query, item.title, description, notes)
        params = GenerationParams(calls.max_tokens or TOKENS_PER_CARD, calls.temperature, schema, model=calls.model)
        result = await self.generator.complete(messages, params, timeouts)
        calls.total.llm_calls += 1
        add_usage(calls.total, result.usage)
        if isinstance(result, Failed):
            calls.failures.append(result)
            log.info("reason call for %s failed: %s", item.id, result.message)
            return None
        try:
            data = json.loads(result.text)
            jsonschema.validate(data, schema)
        except (ValueError, jsonschema.ValidationError) as err:
            log.info("reason answer for %s is not valid: %s", item.id, str(err).splitlines()[0][:200])
            return None
        short, long = data["short"].strip(), data["long"].strip()
        return ReasonOut(item.id, short, long) if short and long else None
