"""Recommendation reasons: one LLM call per search query, whatever the number of items.

The answer is constrained by a JSON schema (the backend's grammar or structured output) and
validated here as well; an invalid answer gets one retry at temperature 0 with a stricter
instruction, then the call fails with InvalidOutput.

Every card's reasons then go through the checks of :mod:`services.reasoning.checks` (not a copy of the
item, nothing from another item, Korean, length, short and long distinct, no repeated phrase). The
failing cards are regenerated once, in one more call naming each card's violations; a card that
still fails is returned with ``status="failed"`` and its violation kinds, never with the failing text:
with code's short factual reason (``source="rule"``, services/reasoning/fallback.py) by default.
:meth:`ReasonWriter.stream` yields each passing card as soon as its JSON object closes (the first
card long before the answer ends), then the regenerated or failed ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, InvalidOutput
from services.reasoning.backends.base import GenerationParams
from services.reasoning.cards import (
    CARDS,
    MIN_REGENERATION_S,
    TOKENS_PER_ITEM,
    VIOLATIONS,
    CardScanner,
    ItemIn,
    ReasonOut,
    _failed,
    parse_reasons,
    raise_for,
    validate_request,
)
from services.reasoning.checks import CheckRules, Finding, check_reason
from services.reasoning.fallback import rule_reason
from services.reasoning.generation import Delta, Failed, Generator, Timeouts, Usage, add_usage
from services.reasoning.prompts import LONG_CAP, SHORT_CAP, reasons_messages, reasons_schema

log = logging.getLogger(__name__)
# (query, [(id, title, description)], strict_retry, notes per id) -> chat messages
PromptBuilder = Callable[[str, list[tuple[str, str, str]], bool, dict[str, list[str]] | None], list[dict[str, str]]]


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
                 prompt: PromptBuilder = reasons_messages, *, rule_reasons: bool = True) -> None:
        self.generator = generator
        self.rule_reasons = rule_reasons  # a failed card gets code's factual reason (source "rule")
        self.rules = rules or CheckRules()
        self.prompt = prompt  # another builder only to compare prompts (bench.llm_select --prompts)

    def _caps(self) -> tuple[int, int]:
        """The answer's length caps: the prompt's targets with room, never past the checks' bounds.

        They bound the output tokens (a grammar-constrained backend cannot run past them); the checks'
        own bounds (``CheckRules``) are unchanged.
        """
        return min(SHORT_CAP, self.rules.short_chars[1]), min(LONG_CAP, self.rules.long_chars[1])

    def _fallback(self, query: str, item: ItemIn, findings: list[Finding]) -> ReasonOut:
        """A card whose reason failed twice: code's factual reason (``rule_reasons``) or none."""
        failed = _failed(item.id, findings)
        return rule_reason(query, item, failed.violations) if self.rule_reasons else failed

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
                    timeouts: Timeouts, model: str = "") -> tuple[list[ReasonOut], Usage]:
        """One call (two when the first answer is invalid), one more for cards that fail the checks."""
        validate_request(query, items)
        start = time.perf_counter()
        total = Usage(llm_calls=0)
        reasons = await self._generate(query, items, max_tokens=max_tokens, temperature=temperature,
                                       timeouts=timeouts, total=total, model=model)
        failing = self.check(query, items, reasons)
        by_id = {r.item_id: r for r in reasons}
        by_id.update(await self._regenerate(query, items, failing, start=start, timeouts=timeouts,
                                            temperature=temperature, total=total, model=model))
        out = [by_id[item.id] for item in items]
        for r in out:
            CARDS.labels(r.status).inc()
        return out, total

    async def stream(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                     timeouts: Timeouts, model: str = "") -> AsyncIterator[ReasonOut | Usage]:
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
                                              model=model,
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
                                                      model=model,
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
                yield self._fallback(query, item, failing[item.id])
        yield total

    async def _cards(self, query: str, items: list[ItemIn], pending: dict[str, ItemIn], *, max_tokens: int,
                     temperature: float, timeouts: Timeouts, total: Usage, failure: list[Failed],
                     notes: dict[str, list[str]] | None = None, model: str = ""
                     ) -> AsyncIterator[tuple[ItemIn, ReasonOut | None]]:
        """One streamed call for the ``pending`` items: each card as its JSON object closes.

        A card is popped from ``pending`` when it arrives (``None``: a field was empty), so what is left
        there afterwards was never written. A backend failure is appended to ``failure``.
        """
        rows = [(i.id, i.title, i.description) for i in items if i.id in pending]
        schema = reasons_schema([row[0] for row in rows], *self._caps())
        budget = max_tokens or min(2048, 64 + TOKENS_PER_ITEM * len(rows))
        messages = self.prompt(query, rows, False, notes)
        scanner = CardScanner()
        async for event in self.generator.stream(messages, GenerationParams(budget, temperature, schema, model=model),
                                                 timeouts):
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
                add_usage(total, event.usage)
                if isinstance(event, Failed):
                    failure.append(event)

    async def _regenerate(self, query: str, items: list[ItemIn], failing: dict[str, list[Finding]], *,
                          start: float, timeouts: Timeouts, temperature: float, total: Usage, model: str = ""
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
                                              timeouts=plan.timeouts, total=total, notes=plan.notes, model=model)
            except (DeadlineExceeded, DependencyUnavailable, InvalidOutput) as err:
                log.info("regenerating %d reason cards failed: %s", len(redo), err)
            else:
                still = self.check(query, items, redone, subset=redo)
                second = {r.item_id: r for r in redone if r.item_id not in still}
                failing.update(still)
        return {item.id: (ReasonOut(item.id, second[item.id].short, second[item.id].long, "regenerated",
                                    plan.first[item.id]) if item.id in second
                          else self._fallback(query, item, failing[item.id]))
                for item in redo}

    async def _generate(self, query: str, items: list[ItemIn], *, max_tokens: int, temperature: float,
                        timeouts: Timeouts, total: Usage, notes: dict[str, list[str]] | None = None,
                        model: str = "") -> list[ReasonOut]:
        """Reasons that follow the schema, in one call (two when the first answer breaks it)."""
        ids = [item.id for item in items]
        schema = reasons_schema(ids, *self._caps())
        rows = [(i.id, i.title, i.description) for i in items]
        budget = max_tokens or min(2048, 64 + TOKENS_PER_ITEM * len(items))
        problem = ""
        for attempt in range(2):
            messages = self.prompt(query, rows, attempt > 0, notes)
            params = GenerationParams(budget, temperature if attempt == 0 else 0.0, schema, model=model)
            result = await self.generator.complete(messages, params, timeouts)
            total.llm_calls += 1
            add_usage(total, result.usage)
            if isinstance(result, Failed):
                raise_for(result)
                return []  # unreachable: raise_for always raises
            parsed = parse_reasons(result.text, items, schema)
            if not isinstance(parsed, str):
                return parsed
            problem = parsed
        raise InvalidOutput(f"the model's reasons broke the schema twice: {problem}")
