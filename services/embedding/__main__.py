"""``python -m services.embedding``: CLI -> settings -> serve (services/bootstrap/server.py)."""

from __future__ import annotations

from services.bootstrap.server import run_service
from services.embedding.config import EmbeddingSettings
from services.embedding.server import create_embedding_service


async def release(service) -> None:
    """Free the service's engines after the server stopped."""
    await service.embedder.close()
    service.engine.close()


def main() -> None:
    """Run the embedding service until SIGTERM."""
    run_service(EmbeddingSettings, "embedding", create_embedding_service, release)


if __name__ == "__main__":
    main()
