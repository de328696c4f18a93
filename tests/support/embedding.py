"""The embedding service as tests configure it (the built model, one thread, port 0) and the queries they embed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.embedding.config import EmbeddingSettings

KOREAN_QUERIES = [
    "비 오는 날 읽기 좋은 소설",
    "부모님 결혼기념일 선물 추천",
    "신입 백엔드 개발자 면접 질문",
    "가성비 좋은 무선 청소기",
]


def embedding_settings(model_dir: Path, **overrides: Any) -> EmbeddingSettings:
    """Settings of an embedding service over ``model_dir``: 127.0.0.1, port 0, no metrics, int8, one thread."""
    base: dict[str, Any] = dict(host="127.0.0.1", port=0, metrics_port=-1, model_dir=model_dir, precision="int8",
                                intra_op_threads=1)
    base.update(overrides)
    return EmbeddingSettings(**base)
