"""Settings of the retrieval service process (env prefix ``MESH_RETRIEVAL_``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.bootstrap.settings import ServiceSettings


class RetrievalSettings(ServiceSettings):
    """Retrieval service: Qdrant dense + Korean BM25 hybrid search."""

    model_config = SettingsConfigDict(env_prefix="MESH_RETRIEVAL_")

    port: int = Field(50052, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    qdrant_location: str = Field(
        ".data/qdrant", description="':memory:', a folder (embedded, persistent) or http(s)://url (server)")
    qdrant_engine: Literal["edge", "client"] = Field(
        "edge", description="embedded engine for ':memory:' and folders: Qdrant Edge, or qdrant-client local mode")
    qdrant_timeout_s: float = Field(10.0, gt=0, description="timeout of calls to a Qdrant server")
    embedding_target: str = Field("127.0.0.1:50051", description="embedding service host:port")
    embed_timeout_s: float = Field(2.0, gt=0, description="deadline of a query-embedding call")
    analyzer: Literal["kiwi", "mecab"] = Field("kiwi", description="Korean morphological analyser")
    term_profile: Literal["nouns", "nouns+predicates", "content"] = Field(
        "nouns+predicates", description="which morphemes become BM25 terms")
    bm25_k1: float = Field(1.2, gt=0, description="BM25 term-frequency saturation")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation")
    fusion: Literal["rrf", "dbsf", "weighted"] = Field(
        "weighted", description="default hybrid fusion (weighted: measured best on autorag-ko)")
    rrf_k: int = Field(60, ge=1, description="default RRF k")
    dense_weight: float = Field(0.2, ge=0, le=1, description="default dense weight for weighted fusion")
