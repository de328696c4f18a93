"""Settings of the retrieval service process (env prefix ``MESH_RETRIEVAL_``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, FilePath, SecretStr, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from services.retrieval.passages import DOCUMENT_LAYOUT, PASSAGE_LAYOUT, Layout
from services.runtime.settings import ServiceSettings


class RetrievalSettings(ServiceSettings):
    """Retrieval service: Qdrant dense + Korean BM25 hybrid search."""

    model_config = SettingsConfigDict(env_prefix="MESH_RETRIEVAL_")

    port: int = Field(50052, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    qdrant_location: str = Field(
        ".data/qdrant", description="':memory:', a folder (embedded, persistent) or http(s)://url (server)")
    qdrant_engine: Literal["edge", "client"] = Field(
        "edge", description="embedded engine for ':memory:' and folders: Qdrant Edge, or qdrant-client local mode")
    qdrant_timeout_s: float = Field(10.0, gt=0, description="timeout of calls to a Qdrant server")
    # A Qdrant server (http(s):// locations only; the embedded engines ignore these).
    qdrant_api_key: SecretStr = Field(
        SecretStr(""), description="API key of the Qdrant server; prefer qdrant_api_key_file or the environment")
    qdrant_api_key_file: FilePath | None = Field(
        None, description="file holding the Qdrant API key (a mounted Secret); excludes qdrant_api_key")
    qdrant_https: bool = Field(
        False, description="TLS to the Qdrant server even for an http:// location (https:// always means TLS)")
    qdrant_ca_cert: FilePath | None = Field(
        None, description="PEM CA bundle that signed the Qdrant server's certificate (default: the system CAs)")
    qdrant_prefer_grpc: bool = Field(
        True, description="talk to a Qdrant server over gRPC on qdrant_grpc_port (false: REST on the URL's port)")
    qdrant_grpc_port: int = Field(6334, ge=1, le=65535, description="gRPC port of the Qdrant server")
    # Layout of the collections created on a Qdrant server or cluster (Qdrant Edge and local mode: one shard).
    shard_number: int | None = Field(
        None, ge=1, description="shards per new collection (unset: the server's default, one per peer)")
    replication_factor: int | None = Field(
        None, ge=1, description="copies of each shard in a cluster (unset: the server's default, 1)")
    write_consistency_factor: int | None = Field(
        None, ge=1, description="replicas that must apply a write before it succeeds (unset: 1)")
    on_disk: Literal["none", "payload", "vectors", "all"] = Field(
        "payload", description="what new collections serve from disk: payload (the server's default), "
                               "vectors (dense vectors and sparse index), all, or none (all in RAM)")
    read_consistency: str = Field(
        "", pattern=r"^(|[1-9][0-9]*|majority|quorum|all)$",
        description="replicas each read asks: a number, majority, quorum or all (empty: the server's default, 1)")
    embedding_target: str = Field("127.0.0.1:50051", description="embedding service host:port")
    more_embedding_targets: str = Field(
        "", pattern=r"^([^,\s]+(,[^,\s]+)*)?$",
        description="further embedding services (host:port, comma-separated), each serving another model revision "
                    "during a model change: a collection is written and searched with the instance serving its own "
                    "revision, and a reindex may upgrade it to any served revision (empty: embedding_target only)")
    role: Literal["writer", "reader"] = Field(
        "writer", description="writer: takes every call (one per store: writes, reindexes, upgrades and rollbacks "
                              "coordinate inside it); reader: searches and describes only, refusing writes "
                              "(FAILED_PRECONDITION), for the replicas that scale searches out")
    meta_ttl_s: float = Field(
        1.0, gt=0, le=60, description="how long a catalog's metadata read from the store is trusted before it is "
                                      "read again: a reader follows the writer's swaps within this time (a "
                                      "search of a version dropped meanwhile is retried on the live one)")
    rollback_grace_s: float = Field(
        3600.0, ge=0, le=30 * 86400, description="how long an upgrade keeps the version it replaced, written along, "
                                                 "for POST /v1/collections/{name}/rollback; 0 drops it at the swap")
    embed_timeout_s: float = Field(2.0, gt=0, description="deadline of a query-embedding call")
    analyzer: Literal["kiwi", "mecab"] = Field("kiwi", description="Korean morphological analyser")
    term_profile: Literal["nouns", "nouns+predicates", "content", "nouns+predicates+units",
                          "nouns+predicates+units+compounds"] = Field(
        "nouns+predicates+units", description="which morphemes become BM25 terms (collections record the "
                                              "profile; another profile is refused until reindexed)")
    bm25_k1: float = Field(1.2, gt=0, description="BM25 term-frequency saturation")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation")
    fusion: Literal["auto", "rrf", "dbsf", "weighted"] = Field(
        "auto", description="default hybrid fusion when a request leaves it unset (auto: per query, "
                            "each leg weighted by its own evidence; see bench/results/fusion_eval.md)")
    rrf_k: int = Field(60, ge=1, description="default RRF k")
    dense_weight: float = Field(0.2, ge=0, le=1, description="default dense weight for weighted fusion (when "
                                                               "a weighted request gives none)")
    passage_chars: int = Field(
        600, ge=0, le=20000, description="documents longer than this (x1.25) are stored as passages of about this "
                                         "many characters, cut at sentence ends; 0 stores one point per document. "
                                         "New collections and reindexes take it; a collection keeps its own "
                                         "(600: chosen on the tune halves of long-ko and autorag-ko, "
                                         "bench/results/passages.md)")
    passage_overlap: int = Field(100, ge=0, description="characters of whole sentences consecutive passages share")

    def more_targets(self) -> list[str]:
        """The further embedding targets, in order."""
        return [t for t in self.more_embedding_targets.split(",") if t]

    def layout(self) -> Layout:
        """The layout new collections and reindexes take."""
        if not self.passage_chars:
            return Layout(DOCUMENT_LAYOUT, 0, 0)
        return Layout(PASSAGE_LAYOUT, self.passage_chars, self.passage_overlap)

    # Field validators (not a model validator) so that a one-line error names the setting at fault.
    @field_validator("qdrant_api_key_file")
    @classmethod
    def _one_key_source(cls, value: FilePath | None, info: ValidationInfo) -> FilePath | None:
        key = info.data.get("qdrant_api_key")
        if value is not None and key is not None and key.get_secret_value():
            raise ValueError("set qdrant_api_key or qdrant_api_key_file, not both")
        return value

    @field_validator("passage_overlap")
    @classmethod
    def _overlap_below_size(cls, value: int, info: ValidationInfo) -> int:
        chars = info.data.get("passage_chars")
        if chars and value >= chars // 2:
            raise ValueError(f"must be under half of passage_chars ({chars}): passages would repeat each other")
        return value

    @field_validator("write_consistency_factor")
    @classmethod
    def _writes_can_succeed(cls, value: int | None, info: ValidationInfo) -> int | None:
        replicas = info.data.get("replication_factor")
        if value is not None and replicas is not None and value > replicas:
            raise ValueError(f"exceeds replication_factor {replicas}: every write would fail")
        return value
