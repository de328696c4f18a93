"""Shared fixtures: the built model, a real embedding server on port 0, clients."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from services.embedding.config import EmbeddingSettings
from services.embedding.modelbuild.paths import current_model_dir
from services.embedding.server import EmbeddingService, create_embedding_service

KOREAN_QUERIES = [
    "비 오는 날 읽기 좋은 소설",
    "부모님 결혼기념일 선물 추천",
    "신입 백엔드 개발자 면접 질문",
    "가성비 좋은 무선 청소기",
]


@pytest.fixture(scope="session")
def model_dir() -> Path:
    path = current_model_dir()
    if not (path / "manifest.json").exists():
        pytest.fail(f"model files missing in {path}: run scripts/setup.sh (it builds them)")
    return path


def make_settings(model_dir: Path, **overrides) -> EmbeddingSettings:
    base = dict(host="127.0.0.1", port=0, metrics_port=-1, model_dir=model_dir, precision="int8",
                intra_op_threads=1)
    base.update(overrides)
    return EmbeddingSettings(**base)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def embedding_service(model_dir: Path):
    service: EmbeddingService = await create_embedding_service(
        make_settings(model_dir, max_texts_per_request=64, metrics_port=0), registry=CollectorRegistry())
    await service.mesh.start()
    await service.warm_up()
    yield service
    await service.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aio_channel(embedding_service: EmbeddingService):
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{embedding_service.port}")
    yield channel
    await channel.close()
