"""The embedding service as retrieval's :class:`~services.retrieval.state.Embedder` (over gRPC)."""

from __future__ import annotations

import numpy as np

from clients import AsyncEmbeddingClient
from clients.errors import DeadlineExceeded as ClientDeadline
from clients.errors import MeshClientError
from clients.errors import Overloaded as ClientOverloaded
from clients.errors import Unavailable as ClientUnavailable
from clients.health import EMBEDDING
from services.bootstrap.errors import DeadlineExceeded, DependencyUnavailable, InvalidInput


class GrpcEmbedder:
    """Calls EmbeddingService.Embed with the caller's remaining budget as the deadline."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._client = AsyncEmbeddingClient(target)

    async def embed(self, texts: list[str], kind: str, timeout_s: float, revision: str = "") -> tuple[np.ndarray, str]:
        """Vectors and the model revision; dependency failures become domain errors.

        ``revision``, when given, is named in the request: an instance serving another model refuses
        (FAILED_PRECONDITION, here :class:`DependencyUnavailable`) instead of answering with its vectors.
        """
        try:
            result = await self._client.embed(texts, kind, timeout_s=max(0.001, timeout_s),  # type: ignore[arg-type]
                                              revision=revision)
        except ClientDeadline as exc:
            raise DeadlineExceeded(f"embedding did not answer within {timeout_s:.3f}s") from exc
        except (ClientUnavailable, ClientOverloaded) as exc:
            raise DependencyUnavailable(f"embedding at {self.target}: {exc.message}") from exc
        except MeshClientError as exc:
            if exc.code.name == "INVALID_ARGUMENT":
                raise InvalidInput(f"embedding rejected the text: {exc.message}") from exc
            raise DependencyUnavailable(f"embedding at {self.target}: {exc.message}") from exc
        return result.vectors, result.model_revision

    async def probe(self) -> None:
        """Return when the embedding service reports SERVING; raise otherwise (health monitor probe)."""
        state = await self._client.health(EMBEDDING, timeout_s=1.0)
        if state != "SERVING":
            raise DependencyUnavailable(f"embedding at {self.target} is {state}")

    async def close(self) -> None:
        """Close the channel."""
        await self._client.close()
