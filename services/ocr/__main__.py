"""``python -m services.ocr``: CLI -> settings -> serve."""

from __future__ import annotations

import asyncio
import logging

from services.bootstrap.server import serve
from services.bootstrap.settings import settings_from_cli
from services.bootstrap.telemetry import make_tracer_provider
from services.ocr.config import OcrSettings
from services.ocr.server import create_ocr_service


def main() -> None:
    """Run the OCR service until SIGTERM."""
    settings = settings_from_cli(OcrSettings, "python -m services.ocr")
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = make_tracer_provider("mesh-ocr", settings.trace_exporter)

    async def build():
        service = await create_ocr_service(settings, tracer_provider=provider)

        async def close() -> None:
            await service.jobs.close()
            await service.extractor.close()
            provider.shutdown()

        return service.mesh, service.warm_up, close

    asyncio.run(serve(settings, build))


if __name__ == "__main__":
    main()
