"""``python -m services.reasoning``: CLI -> settings -> serve."""

from __future__ import annotations

import asyncio
import logging

from services.bootstrap.server import serve
from services.bootstrap.settings import settings_from_cli
from services.bootstrap.telemetry import make_tracer_provider
from services.reasoning.config import ReasoningSettings
from services.reasoning.server import create_reasoning_service


def main() -> None:
    """Run the reasoning service until SIGTERM."""
    settings = settings_from_cli(ReasoningSettings, "python -m services.reasoning")
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = make_tracer_provider("mesh-reasoning", settings.trace_exporter)

    async def build():
        service = await create_reasoning_service(settings, tracer_provider=provider)

        async def close() -> None:
            await service.generator.close()
            provider.shutdown()

        return service.mesh, service.warm_up, close

    asyncio.run(serve(settings, build))


if __name__ == "__main__":
    main()
