"""Streams one answer through the configured backends with stage deadlines, failover and usage.

Events: zero or more :class:`Delta`, then exactly one :class:`Finished` or :class:`Failed`. A
failure before the first token moves on to the next backend (while the total deadline allows);
after the first token it ends the stream with ``Failed``. Leaving the iterator early (the caller
went away) closes the backend's stream, which cancels its HTTP request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import cast

from opentelemetry import trace
from prometheus_client import Counter, Histogram

from services.bootstrap.errors import InvalidInput, Violation
from services.reasoning.backends.base import (
    BackendError,
    BackendRejected,
    Chunk,
    ContextLengthExceeded,
    GenerationParams,
    LlmBackend,
)

TTFT = Histogram("mesh_reasoning_ttft_seconds", "time to first token", ["backend"],
                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30))
FAILURES = Counter("mesh_reasoning_failures", "calls ended by an error or a failover", ["backend", "kind"])
TOKENS = Counter("mesh_reasoning_tokens", "tokens per backend call (estimated when the backend reports none)",
                 ["backend", "type"])
TOKENS_PER_SECOND = Histogram("mesh_reasoning_tokens_per_second", "generation speed of finished calls", ["backend"],
                              buckets=(1, 2, 5, 10, 20, 30, 50, 75, 100, 200, 500))
COST = Counter("mesh_reasoning_cost_usd", "cost of backend calls from the price table", ["backend"])
FAILURE_KINDS = ("first_token_timeout", "generation_timeout", "total_timeout", "backend_failed")


@dataclass(frozen=True)
class Timeouts:
    """Stage deadlines in seconds."""

    first_token_s: float = 5.0
    generation_s: float = 20.0
    total_s: float = 30.0


@dataclass
class Usage:
    """Accounting of one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from the backend's prompt cache (as it reports)
    ttft_ns: int = 0
    total_ns: int = 0
    tokens_per_second: float = 0.0
    cost_usd: float = 0.0
    backend: str = ""
    model: str = ""
    estimated: bool = False
    failed_over: list[str] = field(default_factory=list)
    llm_calls: int = 1


@dataclass
class Delta:
    """A piece of text."""

    text: str


@dataclass
class Finished:
    """The answer is complete."""

    finish_reason: str
    usage: Usage
    text: str


@dataclass
class Failed:
    """The answer is incomplete.

    ``kind`` is first_token_timeout, generation_timeout, total_timeout or backend_failed.
    """

    kind: str
    message: str
    completion_tokens: int
    usage: Usage


Event = Delta | Finished | Failed


def add_usage(total: Usage, usage: Usage) -> None:
    """Accumulate one LLM call's accounting into ``total``."""
    total.prompt_tokens += usage.prompt_tokens
    total.completion_tokens += usage.completion_tokens
    total.cached_prompt_tokens += usage.cached_prompt_tokens
    total.ttft_ns = total.ttft_ns or usage.ttft_ns
    total.total_ns += usage.total_ns
    total.tokens_per_second = usage.tokens_per_second or total.tokens_per_second
    total.cost_usd += usage.cost_usd
    total.backend, total.model = usage.backend or total.backend, usage.model or total.model
    total.estimated = total.estimated or usage.estimated
    total.failed_over += usage.failed_over


class PriceTable:
    """USD per million prompt and completion tokens, per model (JSON ``{"model": [in, out]}``)."""

    def __init__(self, raw: str = "{}") -> None:
        data = json.loads(raw or "{}")
        self.prices = {str(k): (float(v[0]), float(v[1])) for k, v in data.items()}

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """The call's cost; unknown models (local ones) cost nothing."""
        p_in, p_out = self.prices.get(model, (0.0, 0.0))
        return (p_in * prompt_tokens + p_out * completion_tokens) / 1e6


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """Token estimate when a backend reports no usage.

    One token per character plus 4 per message (the chat template): an upper bound in practice, as
    Qwen2.5's tokenizer gives 0.6-0.8 tokens per character for Korean text and ~0.2 for English.
    """
    return sum(len(m["content"]) + 4 for m in messages)


class Generator:
    """Runs calls over an ordered list of backends."""

    def __init__(self, backends: list[LlmBackend], defaults: Timeouts, prices: PriceTable,
                 prefill_tokens_per_s: float = 0.0) -> None:
        if not backends:
            raise ValueError("at least one backend is required")
        self.backends = backends
        self.defaults = defaults
        self.prices = prices
        # The first-token stage starts after the prompt is read: a long prompt (six tools' schemas on two
        # cores: ~2,000 tokens at ~110 tokens/s) passed a 5 s stage on its prefill alone. 0: no allowance.
        self.prefill_tokens_per_s = prefill_tokens_per_s
        for backend in backends:  # every series exists from the start (dashboards, rate() over zero)
            TTFT.labels(backend.name)
            TOKENS_PER_SECOND.labels(backend.name)
            COST.labels(backend.name)
            for kind in ("prompt", "completion"):
                TOKENS.labels(backend.name, kind)
            for kind in FAILURE_KINDS:
                FAILURES.labels(backend.name, kind)

    def prefill_s(self, messages: list[dict[str, str]]) -> float:
        """The time reading the prompt may take before its first token (an upper bound: 1 token a character)."""
        return estimate_tokens(messages) / self.prefill_tokens_per_s if self.prefill_tokens_per_s > 0 else 0.0

    async def stream(self, messages: list[dict[str, str]], params: GenerationParams, timeouts: Timeouts,
                     *, failover: bool = True) -> AsyncIterator[Event]:
        """Stream one answer (see the module doc)."""
        start = time.perf_counter()
        total_end = start + timeouts.total_s
        usage = Usage()
        backends = self.backends if failover else self.backends[:1]
        last_kind, last_message = "backend_failed", "no backend answered"
        for backend in backends:
            left = total_end - time.perf_counter()
            if left <= 0:
                last_kind, last_message = "total_timeout", f"total deadline {timeouts.total_s:.1f}s passed"
                break
            call = dataclasses.replace(params, timeout_s=left)
            chunks = cast(AsyncGenerator[Chunk, None], backend.stream(messages, call))
            first_limit = min(timeouts.first_token_s + self.prefill_s(messages), left)
            try:
                try:
                    first = await self._first(chunks, first_limit)
                except TimeoutError:
                    total = time.perf_counter() >= total_end
                    last_kind = "total_timeout" if total else "first_token_timeout"
                    last_message = f"{backend.name}: no first token within {first_limit:.1f}s"
                    FAILURES.labels(backend.name, last_kind).inc()
                    usage.failed_over.append(backend.name)
                    continue
                except ContextLengthExceeded as err:
                    # The same prompt is as long for the next backend: the caller's to shorten, not failed over.
                    raise InvalidInput("the prompt is longer than the model's context",
                                       [Violation("messages", f"context_length_exceeded: {err}"[:300])]) from None
                except BackendRejected as err:
                    # The same request is as wrong for the next backend: the caller's, not "retry later".
                    raise InvalidInput("the model server refused the request",
                                       [Violation("request", str(err)[:300])]) from None
                except BackendError as err:
                    last_kind, last_message = "backend_failed", str(err)
                    FAILURES.labels(backend.name, last_kind).inc()
                    usage.failed_over.append(backend.name)
                    continue
                async for event in self._rest(backend, chunks, first, start, total_end, timeouts, usage, messages):
                    yield event
                return
            finally:
                await chunks.aclose()
        usage.total_ns = int((time.perf_counter() - start) * 1e9)
        yield Failed(last_kind, last_message, 0, usage)

    @staticmethod
    async def _first(chunks, timeout: float) -> Chunk | None:
        """The first chunk with text (or the end of an empty answer: None), within ``timeout``."""
        async def first() -> Chunk | None:
            async for chunk in chunks:
                if chunk.text or chunk.finish_reason:
                    return chunk
            return None

        return await asyncio.wait_for(first(), timeout)

    async def _rest(self, backend: LlmBackend, chunks, first: Chunk | None, start: float, total_end: float,
                    timeouts: Timeouts, usage: Usage, messages: list[dict[str, str]]) -> AsyncIterator[Event]:
        first_at = time.perf_counter()
        usage.ttft_ns = int((first_at - start) * 1e9)
        usage.backend, usage.model = backend.name, backend.model
        TTFT.labels(backend.name).observe(first_at - start)
        gen_end = min(first_at + timeouts.generation_s, total_end)
        parts: list[str] = []
        count = 0
        finish = "stop"
        reported: tuple[int | None, int | None] = (None, None)
        cached = 0
        chunk = first
        while chunk is not None:
            if chunk.text:
                parts.append(chunk.text)
                count += 1
                yield Delta(chunk.text)
            if chunk.finish_reason:
                finish = chunk.finish_reason
            if chunk.prompt_tokens is not None or chunk.completion_tokens is not None:
                reported = (chunk.prompt_tokens, chunk.completion_tokens)
                cached = chunk.cached_prompt_tokens or cached
            left = gen_end - time.perf_counter()
            try:
                if left <= 0:
                    raise TimeoutError
                chunk = await asyncio.wait_for(anext(chunks, None), left)
            except TimeoutError:
                kind = "total_timeout" if gen_end >= total_end else "generation_timeout"
                FAILURES.labels(backend.name, kind).inc()
                self._account(usage, backend, messages, reported, count, start, first_at, cached)
                limit = timeouts.total_s if kind == "total_timeout" else timeouts.generation_s
                yield Failed(kind, f"{backend.name}: {kind.replace('_', ' ')} after {limit:.1f}s", count, usage)
                return
            except BackendError as err:
                FAILURES.labels(backend.name, "backend_failed").inc()
                self._account(usage, backend, messages, reported, count, start, first_at, cached)
                yield Failed("backend_failed", f"{err} (after the first token)", count, usage)
                return
        self._account(usage, backend, messages, reported, count, start, first_at, cached)
        yield Finished(finish, usage, "".join(parts))

    def _account(self, usage: Usage, backend: LlmBackend, messages, reported, count: int, start: float,
                 first_at: float, cached: int = 0) -> None:
        now = time.perf_counter()
        prompt, completion = reported
        usage.estimated = prompt is None or completion is None
        usage.prompt_tokens = prompt if prompt is not None else estimate_tokens(messages)
        usage.completion_tokens = completion if completion is not None else count
        usage.cached_prompt_tokens = min(cached, usage.prompt_tokens)
        usage.total_ns = int((now - start) * 1e9)
        gen_s = now - first_at
        usage.tokens_per_second = (usage.completion_tokens - 1) / gen_s if gen_s > 0 and usage.completion_tokens > 1 \
            else 0.0
        usage.cost_usd = self.prices.cost(backend.model, usage.prompt_tokens, usage.completion_tokens)
        TOKENS.labels(backend.name, "prompt").inc(usage.prompt_tokens)
        TOKENS.labels(backend.name, "completion").inc(usage.completion_tokens)
        TOKENS.labels(backend.name, "cached_prompt").inc(usage.cached_prompt_tokens)
        COST.labels(backend.name).inc(usage.cost_usd)
        if usage.tokens_per_second > 0:
            TOKENS_PER_SECOND.labels(backend.name).observe(usage.tokens_per_second)
        trace.get_current_span().set_attributes({
            "mesh.llm.backend": backend.name, "mesh.llm.model": backend.model,
            "mesh.llm.tokens_in": usage.prompt_tokens, "mesh.llm.tokens_out": usage.completion_tokens,
            "mesh.llm.ttft_ms": round((first_at - start) * 1e3, 1), "mesh.llm.tokens_estimated": usage.estimated})

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams, timeouts: Timeouts,
                       *, failover: bool = True) -> Finished | Failed:
        """Run a call to its end and return the terminal event (text collected)."""
        async for event in self.stream(messages, params, timeouts, failover=failover):
            if isinstance(event, Finished | Failed):
                return event
        raise AssertionError("stream ended without a terminal event")

    async def close(self) -> None:
        """Close every backend."""
        for backend in self.backends:
            await backend.close()
