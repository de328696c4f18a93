"""The engine interface every embedding backend implements (tokenise / forward / describe)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from services.embedding.engine.tokenizer import TokenBatch


class EmbeddingEngine(ABC):
    """Runs the pooled, L2-normalised model on a padded token batch. Calls are blocking."""

    name: str = "abstract"
    precision: str = "fp32"
    dim: int = 384

    @abstractmethod
    def encode_core(self, batch: TokenBatch) -> np.ndarray:
        """Embeddings ``float32 [n, dim]`` for a padded batch (blocking; call off the event loop)."""

    def warm_up(self) -> None:
        """Run one small batch so the first caller does not pay for lazy initialisation."""
        ids = np.array([[0, 6, 2]], dtype=np.int64)
        self.encode_core(TokenBatch(ids, np.ones_like(ids)))

    def release_memory(self) -> None:  # noqa: B027 - optional hook
        """Give spare activation memory back to the OS after a large batch (blocking)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""
