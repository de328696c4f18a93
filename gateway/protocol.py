"""REST contract v1: request and response models (the OpenAPI is generated from these)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _unicode_only(value: Any) -> Any:
    """Refuse lone surrogates (JSON can carry an escaped one; no UTF-8 encoder, protobuf included, takes it)."""
    texts = [value] if isinstance(value, str) else (
        [v for v in value if isinstance(v, str)] if isinstance(value, list) else [])
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text (no lone surrogate code points)") from None
    return value


class UnicodeText(BaseModel):
    """Request models whose text fields must be valid Unicode (checked per field, so errors name it)."""

    @field_validator("*", mode="after")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        return _unicode_only(value)


class Strict(UnicodeText):
    """Unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


class FilterCondition(Strict):
    """One test on a declared payload field: exactly one of eq, any_of, or range bounds."""

    field: str = Field(min_length=1, max_length=64)
    eq: str | int | bool | None = Field(None, description="equals (keyword, integer or bool fields)")
    any_of: list[str] | None = Field(None, min_length=1, max_length=100, description="keyword is one of")
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None


class SearchFilter(Strict):
    """Documents pass when every ``must`` holds and no ``must_not`` does."""

    must: list[FilterCondition] = Field(default_factory=list, max_length=32)
    must_not: list[FilterCondition] = Field(default_factory=list, max_length=32)


class SearchRequest(Strict):
    """A hybrid (default), dense or keyword search."""

    collection: str = Field(min_length=1, max_length=64, examples=["books"])
    query: str = Field(min_length=1, max_length=2000, examples=["비 오는 날 읽기 좋은 소설"])
    top_k: int = Field(10, ge=1, le=100)
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    filter: SearchFilter | None = None


class Hit(BaseModel):
    """One result; ranks are 1-based per leg, null when the leg did not return it."""

    id: str
    score: float
    text: str
    payload: dict[str, Any]
    dense_rank: int | None
    keyword_rank: int | None


class SearchTimings(BaseModel):
    """Milliseconds per stage."""

    embed_ms: float
    retrieval_ms: float
    total_ms: float
    cache_hit: bool


class SearchResponse(BaseModel):
    """Hits best first.

    ``degraded`` is true when the search ran keyword-only because the query could not be embedded
    in time (the response is still a correct keyword search).
    """

    hits: list[Hit]
    mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    timings: SearchTimings


class CollectionCreate(Strict):
    """A new catalog and its filterable fields."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$", examples=["books"])
    fields: dict[str, Literal["keyword", "integer", "float", "bool"]] = Field(default_factory=dict)

    @field_validator("fields")
    @classmethod
    def _few_fields(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_FIELDS:
            raise ValueError(f"at most {MAX_FIELDS} filterable fields")
        return value


class CollectionInfo(BaseModel):
    """A catalog."""

    name: str
    collection: str
    documents: int
    embedding_revision: str
    tokenizer: str
    fields: dict[str, str]


MAX_FIELDS = 64  # filterable fields per collection: each is an index built on one database thread
MAX_PAYLOAD_DEPTH = 8
INT64 = 2**63


def _storable(value: Any, depth: int = 1) -> None:
    """Raise ValueError unless ``value`` fits a payload.

    JSON types only, finite numbers within int64/float64, valid Unicode, at most ``MAX_PAYLOAD_DEPTH``
    levels of nesting: anything else cannot be stored and used to leave its ingest job running forever.
    """
    if depth > MAX_PAYLOAD_DEPTH:
        raise ValueError(f"nested deeper than {MAX_PAYLOAD_DEPTH} levels")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not -INT64 <= value < INT64:
            raise ValueError("integers must fit in 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite (no NaN or infinity)")
    elif isinstance(value, str):
        _unicode_only(value)
    elif isinstance(value, list):
        for item in value:
            _storable(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _unicode_only(key)
            _storable(item, depth + 1)


class DocumentIn(Strict):
    """A document to index."""

    id: str = Field(min_length=1, max_length=256)
    text: str = Field(min_length=1, max_length=20000)
    payload: dict[str, Any] = Field(default_factory=dict)

    @field_validator("payload")
    @classmethod
    def _payload_storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        _storable(value)
        return value


class IngestRequest(Strict):
    """Documents to upsert (idempotent by id), written as a background job."""

    documents: list[DocumentIn] = Field(min_length=1, max_length=10000)
    batch_size: int = Field(64, ge=1, le=256)


class DeleteRequest(Strict):
    """Ids to remove (unknown ids are fine)."""

    ids: list[str] = Field(min_length=1, max_length=10000)


class Job(BaseModel):
    """A background job (ingest or reindex) and its progress."""

    id: str
    kind: Literal["ingest", "reindex"]
    collection: str
    state: Literal["queued", "running", "succeeded", "failed"]
    done: int
    total: int
    failed_batches: int = 0
    errors: list[str] = Field(default_factory=list)
    result: dict[str, Any] | None = None


class EmbeddingsRequest(UnicodeText):
    """OpenAI-compatible embeddings request.

    ``input`` strings are embedded as passages unless the model id ends with ``:query``.
    """

    input: str | list[str] = Field(description="text or 1-256 texts (token-id input is not supported)")
    model: str = Field(examples=["intfloat/multilingual-e5-small"])
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, description="must be the model's dimension if given")
    user: str | None = None


class EmbeddingData(BaseModel):
    """One vector (a float list, or base64 of little-endian float32 when asked)."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    """Tokens counted by the model's tokenizer."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    """OpenAI-compatible embeddings response."""

    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: Usage


class ModelCard(BaseModel):
    """One model."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """OpenAI-compatible model list."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    """Liveness / readiness."""

    status: Literal["ok", "degraded", "unavailable"]
    services: dict[str, str] = Field(default_factory=dict)
