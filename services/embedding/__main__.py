"""``python -m services.embedding``: CLI -> settings -> serve."""

from __future__ import annotations

import asyncio
import logging

from services.bootstrap.server import serve
from services.bootstrap.settings import settings_from_cli
from services.bootstrap.telemetry import make_tracer_provider
from services.embedding.config import EmbeddingSettings
from services.embedding.server import create_embedding_service


def main() -> None:
    """Run the embedding service until SIGTERM."""
    settings = settings_from_cli(EmbeddingSettings, "python -m services.embedding")
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provider = make_tracer_provider("mesh-embedding", settings.trace_exporter)

    async def build():
        service = await create_embedding_service(settings, tracer_provider=provider)

        async def close() -> None:
            await service.embedder.close()
            service.engine.close()
            provider.shutdown()

        return service.mesh, service.warm_up, close

    asyncio.run(serve(settings, build))


if __name__ == "__main__":
    main()
