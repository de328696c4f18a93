"""``python -m services.ocr``: CLI -> settings -> serve (services/bootstrap/server.py)."""

from __future__ import annotations

from services.bootstrap.server import run_service
from services.ocr.config import OcrSettings
from services.ocr.server import create_ocr_service


def main() -> None:
    """Run the ocr service until SIGTERM."""
    run_service(OcrSettings, "ocr", create_ocr_service)


if __name__ == "__main__":
    main()
