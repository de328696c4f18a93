"""The embedding service's logic, free of gRPC: validate, tokenise off the loop, batch, time."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from services.bootstrap.errors import InvalidInput, Violation
from services.embedding.batcher import MicroBatcher
from services.embedding.engine.tokenizer import E5Tokenizer

KINDS = ("query", "passage")
INLINE_TOKENIZE_CHARS = 256  # larger requests are tokenised on a worker thread


@dataclass(frozen=True)
class EmbedLimits:
    """Input limits enforced before any work is queued."""

    max_texts: int
    max_text_chars: int
    max_tokens: int


@dataclass
class EmbedResult:
    """Vectors of one request, per-text token facts and the request's timings (ns)."""

    vectors: np.ndarray
    token_counts: list[int]
    truncated: list[bool]
    tokenize_ns: int
    queue_ns: int
    inference_ns: int
    total_ns: int
    batch_size: int


def validate(texts: list[str], kind: str | None, limits: EmbedLimits) -> None:
    """Raise :class:`InvalidInput` naming every bad field (nothing is queued for a bad request)."""
    violations: list[Violation] = []
    if kind not in KINDS:
        violations.append(Violation("kind", "must be QUERY or PASSAGE"))
    if not texts:
        violations.append(Violation("texts", "at least one text is required"))
    elif len(texts) > limits.max_texts:
        violations.append(Violation("texts", f"{len(texts)} texts; at most {limits.max_texts} per request"))
    else:
        for i, text in enumerate(texts):
            if not text.strip():
                violations.append(Violation(f"texts[{i}]", "empty or whitespace-only text"))
            elif len(text) > limits.max_text_chars:
                violations.append(Violation(f"texts[{i}]",
                                            f"{len(text)} characters; at most {limits.max_text_chars}"))
    if violations:
        raise InvalidInput(f"invalid embed request: {violations[0].field}: {violations[0].description}"
                           + (f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""),
                           violations)


class Embedder:
    """Embeds texts through a tokenizer and a micro-batcher; holds no gRPC types."""

    def __init__(self, tokenizer: E5Tokenizer, batcher: MicroBatcher, limits: EmbedLimits,
                 revision: str) -> None:
        self.tokenizer = tokenizer
        self.batcher = batcher
        self.limits = limits
        self.revision = revision
        self._tokenize_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize")

    async def embed(self, texts: list[str], kind: str | None, *, strict: bool = False,
                    deadline: float | None = None) -> EmbedResult:
        """Validate, tokenise (off the event loop), queue and wait for the vectors."""
        start = time.perf_counter()
        validate(texts, kind, self.limits)
        if sum(len(t) for t in texts) <= INLINE_TOKENIZE_CHARS:
            # A thread hop costs more than tokenising one short query (tens of microseconds).
            encoded = self.tokenizer.encode(texts, kind == "query")
        else:
            encoded = await asyncio.get_running_loop().run_in_executor(
                self._tokenize_pool, self.tokenizer.encode, texts, kind == "query")
        tokenized = time.perf_counter()
        if strict:
            too_long = [Violation(f"texts[{i}]", f"{e.full_length} tokens; the limit is {self.limits.max_tokens} "
                                  "(strict_length is set)") for i, e in enumerate(encoded) if e.truncated]
            if too_long:
                raise InvalidInput(f"{len(too_long)} text(s) exceed the token limit", too_long)
        outcome = await self.batcher.submit(encoded, deadline)
        return EmbedResult(
            vectors=outcome.vectors,
            token_counts=[len(e.ids) for e in encoded],
            truncated=[e.truncated for e in encoded],
            tokenize_ns=int((tokenized - start) * 1e9),
            queue_ns=outcome.queue_ns,
            inference_ns=outcome.inference_ns,
            total_ns=int((time.perf_counter() - start) * 1e9),
            batch_size=outcome.batch_size,
        )

    async def close(self) -> None:
        """Stop the batcher and the tokeniser thread."""
        await self.batcher.close()
        self._tokenize_pool.shutdown(wait=True)
