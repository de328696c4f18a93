"""One interface over LLM backends: stream chat messages, get text chunks (and usage when known)."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from prometheus_client import Gauge

INFLIGHT = Gauge("mesh_reasoning_backend_inflight", "backend requests open right now", ["backend"])


@dataclass(frozen=True)
class GenerationParams:
    """What a backend needs besides the messages."""

    max_tokens: int
    temperature: float
    json_schema: dict | None = None
    timeout_s: float = 30.0  # the transport's own safety net; stage deadlines are enforced above
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    model: str = ""  # the model to ask for; empty: the backend's configured one
    # Read the prompt afresh (llama.cpp: cache_prompt false): the same output for the same input whatever ran
    # before (a reused KV prefix changes the batch sizes, and with them the logits' last bits), at the cost of
    # the prompt cache. Asked by tasks that declare `sampling.reproducible`.
    fresh_prompt: bool = False


@dataclass
class Chunk:
    """A piece of the answer; the last chunk may carry the finish reason and reported usage."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # of prompt_tokens, read from the backend's prompt cache


class BackendError(Exception):
    """The backend could not answer (connection refused, HTTP error, malformed or broken stream)."""


class ContextLengthExceeded(BackendError):
    """The backend refused the prompt as longer than its context: the caller's error, never failed over."""


class BackendRejected(BackendError):
    """The backend refused the request itself (an HTTP 4xx, or a grammar it could not build): the caller's error.

    Another backend given the same request would refuse it too, so it is not failed over, and the
    caller gets INVALID_ARGUMENT (400), not UNAVAILABLE (503, "retry").
    """


@dataclass
class LlmBackend(abc.ABC):
    """A chat-completion backend. ``stream`` must release its request when the iterator is closed."""

    name: str
    model: str
    labels: dict[str, str] = field(default_factory=dict)

    @abc.abstractmethod
    def stream(self, messages: list[dict[str, str]], params: GenerationParams) -> AsyncIterator[Chunk]:
        """Yield chunks of the answer; raise BackendError on failure."""

    @abc.abstractmethod
    async def probe(self) -> None:
        """Return when the backend answers now; raise BackendError otherwise (the health monitor's probe)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
