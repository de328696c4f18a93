"""``python -m services.embedding``: CLI -> settings -> serve (services/bootstrap/server.py)."""

from __future__ import annotations

from services.bootstrap.server import run_service
from services.embedding.config import EmbeddingSettings
from services.embedding.server import create_embedding_service


def main() -> None:
    """Run the embedding service until SIGTERM."""
    run_service(EmbeddingSettings, "embedding", create_embedding_service)


if __name__ == "__main__":
    main()
