"""``python -m services.retrieval``: CLI -> settings -> serve (services/bootstrap/server.py)."""

from __future__ import annotations

from services.bootstrap.server import run_service
from services.retrieval.config import RetrievalSettings
from services.retrieval.server import create_retrieval_service


def main() -> None:
    """Run the retrieval service until SIGTERM."""
    run_service(RetrievalSettings, "retrieval", create_retrieval_service)


if __name__ == "__main__":
    main()
