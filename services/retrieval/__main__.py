"""``python -m services.retrieval``: CLI -> settings -> serve."""

from __future__ import annotations

import asyncio
import logging

from services.bootstrap.server import serve
from services.bootstrap.settings import settings_from_cli
from services.bootstrap.telemetry import make_tracer_provider
from services.retrieval.config import RetrievalSettings
from services.retrieval.server import create_retrieval_service


def main() -> None:
    """Run the retrieval service until SIGTERM."""
    settings = settings_from_cli(RetrievalSettings, "python -m services.retrieval")
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = make_tracer_provider("mesh-retrieval", settings.trace_exporter)

    async def build():
        service = await create_retrieval_service(settings, tracer_provider=provider)

        async def close() -> None:
            await service.retriever.close()
            service.retriever.store.close()
            provider.shutdown()

        return service.mesh, service.warm_up, close

    asyncio.run(serve(settings, build))


if __name__ == "__main__":
    main()
