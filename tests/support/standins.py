"""Stand-ins the tests share, each implementing the real interface, for failures that must be injected.

They are not models: they answer from a script so a test can make the embedding service fail in
one precise way, or observe the moment a backend request is cut short.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable

import grpc
import numpy as np
from mesh.embedding.v1 import embedding_pb2 as epb

from bench.standin import ChatStandIn
from clients.embedding import EmbedResult, ModelInfo
from clients.errors import MeshClientError


class StandInEmbeddingClient:
    """Stand-in for :class:`clients.AsyncEmbeddingClient` (same async ``info``/``embed``/``close``) to inject failures.

    Each ``embed`` call takes the next scripted outcome: a ``clients.errors`` exception to raise (the
    real client's own types), or None to answer with a deterministic unit vector of ``dim`` floats
    produced by ``revision``. The last outcome repeats. Calls are recorded with the timeout they got.
    """

    def __init__(self, outcomes: Iterable[MeshClientError | None] = (None,), *, revision: str = "rev-a",
                 dim: int = 8, info_error: MeshClientError | None = None) -> None:
        self.outcomes = deque(outcomes)
        self.revision = revision
        self.dim = dim
        self.info_error = info_error
        self.embed_calls: list[tuple[list[str], str, float | None]] = []
        self.info_calls = 0
        self.closed = False

    def vector_of(self, text: str) -> np.ndarray:
        """The vector this stand-in answers for ``text`` (seeded by the text, unit length)."""
        seed = int.from_bytes(hashlib.sha256(f"{self.revision}\n{text}".encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        v = rng.standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    async def info(self, timeout_s: float | None = None) -> ModelInfo:
        self.info_calls += 1
        if self.info_error is not None:
            raise self.info_error
        return ModelInfo(model_id="stand-in", revision=self.revision, dim=self.dim, max_tokens=512, engine="stand-in",
                         precision="fp32", max_texts_per_request=64)

    async def embed(self, texts: list[str], kind: str = "query", *, strict: bool = False,
                    timeout_s: float | None = None) -> EmbedResult:
        self.embed_calls.append((list(texts), kind, timeout_s))
        outcome = self.outcomes[0] if len(self.outcomes) == 1 else self.outcomes.popleft()
        if outcome is not None:
            raise outcome
        vectors = np.stack([self.vector_of(t) for t in texts])
        return EmbedResult(vectors=vectors, token_counts=[len(t) for t in texts], truncated=[False] * len(texts),
                           model_revision=self.revision, timings=epb.EmbedTimings())

    async def close(self) -> None:
        self.closed = True


def unavailable() -> MeshClientError:
    """What the real client raises when the embedding service cannot be reached."""
    from clients.errors import Unavailable

    return Unavailable(grpc.StatusCode.UNAVAILABLE, "connection refused")


def deadline_exceeded() -> MeshClientError:
    """What the real client raises when its call's deadline passed."""
    from clients.errors import DeadlineExceeded

    return DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")


class ObservedChatStandIn(ChatStandIn):
    """bench.standin.ChatStandIn whose early closes also set an event, so a test waits for the moment itself.

    (The base class counts ``closed_early`` from its handler thread; this keeps the count and adds
    ``cut_short``, a threading.Event set on each count.)
    """

    def __init__(self, script: list[dict] | Callable[[dict], dict], port: int = 0) -> None:
        self.cut_short = threading.Event()
        self._closed_early = 0
        super().__init__(script, port)

    @property  # type: ignore[override]
    def closed_early(self) -> int:
        return self._closed_early

    @closed_early.setter
    def closed_early(self, value: int) -> None:
        self._closed_early = value
        if value:
            self.cut_short.set()

    async def wait_cut_short(self, timeout_s: float = 10.0) -> bool:
        """Whether a backend request was cut short (waiting for it up to ``timeout_s``, off the event loop)."""
        return await asyncio.to_thread(self.cut_short.wait, timeout_s)


def card_answer(short: str, long: str, split_at: int = 12) -> dict:
    """A ChatStandIn script entry: one card's JSON answer as an LLM writes it, in two pieces."""
    text = json.dumps({"short": short, "long": long}, ensure_ascii=False)
    return {"chunks": [text[:split_at], text[split_at:]]}


def per_card(answers: dict[str, list]) -> Callable[[dict], dict]:
    """A ChatStandIn script answering reason calls by item: ``answers`` maps a title to its calls' answers.

    Each call whose last message names the title takes the next answer (the last one repeats): a
    ``(short, long)`` pair or a behaviour dict as ChatStandIn takes it. Another request gets an error.
    """
    taken: dict[str, int] = {}

    def reply(body: dict) -> dict:
        last = body["messages"][-1]["content"]
        for title, script in answers.items():
            if f"상품: {title}" in last:
                i = taken.get(title, 0)
                taken[title] = i + 1
                answer = script[min(i, len(script) - 1)]
                return answer if isinstance(answer, dict) else card_answer(*answer)
        return {"status": 500, "chunks": ["no scripted answer"]}

    return reply
