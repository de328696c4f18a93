"""``python -m services.reasoning``: CLI -> settings -> serve (services/bootstrap/server.py)."""

from __future__ import annotations

from services.bootstrap.server import run_service
from services.reasoning.config import ReasoningSettings
from services.reasoning.server import create_reasoning_service


def main() -> None:
    """Run the reasoning service until SIGTERM."""
    run_service(ReasoningSettings, "reasoning", create_reasoning_service)


if __name__ == "__main__":
    main()
