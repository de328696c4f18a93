"""Collections, documents and jobs: the REST models (contract v1; fields are only ever added)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from gateway.http.models import Strict, unicode_only


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
    layout: str | None = Field(None, description="how documents are stored: `document` (one point each, a collection "
                                                 "written before passages) or `passages:<chars>/<overlap>` (long "
                                                 "documents cut into passages); a reindex moves a collection to the "
                                                 "service's layout")
    previous_collection: str | None = Field(None, description="the version an upgrade replaced, kept for "
                                                              "`POST /v1/collections/{name}/rollback` until "
                                                              "`rollback_until`")
    previous_embedding_revision: str | None = Field(None, description="embedding revision of `previous_collection`")
    rollback_until: float | None = Field(None, description="unix seconds after which `previous_collection` is removed")


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
        unicode_only(value)
    elif isinstance(value, list):
        for item in value:
            _storable(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            unicode_only(key)
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

    @field_validator("documents")
    @classmethod
    def _unique_ids(cls, value: list[DocumentIn]) -> list[DocumentIn]:
        seen: dict[str, int] = {}
        for i, doc in enumerate(value):
            if doc.id in seen:
                raise ValueError(f"document id {doc.id!r} appears twice: documents[{seen[doc.id]}] and "
                                 f"documents[{i}] (ids are unique within a request)")
            seen[doc.id] = i
        return value


class DeleteRequest(Strict):
    """Ids to remove (unknown ids are fine)."""

    ids: list[str] = Field(min_length=1, max_length=10000)


class GateQueryIn(Strict):
    """A judged query of the quality gate: its text and the ids of the documents relevant to it."""

    query: str = Field(min_length=1, max_length=1000)
    relevant_ids: list[str] = Field(min_length=1, max_length=100)


class QualityGateIn(Strict):
    """Judged queries run on the old and the new version before the swap."""

    queries: list[GateQueryIn] = Field(min_length=1, max_length=1000)
    margin: float = Field(0.02, ge=0, le=1, description="how far below the old version's recall@10 and nDCG@10 the "
                                                        "new one may score (0.02 = 2 points)")
    mode: Literal["dense", "hybrid", "keyword"] = Field(
        "dense", description="the search mode both versions are judged in (dense: the leg a model change moves)")


class UpgradeRequest(Strict):
    """Rebuild a collection with another embedding model revision, behind a quality gate."""

    embedding_revision: str = Field(min_length=1, max_length=200, description="a revision an embedding instance "
                                                                              "of the mesh serves")
    gate: QualityGateIn | None = Field(None, description="judged queries; without one the swap is not checked")
    batch_size: int = Field(64, ge=1, le=256)
    grace_s: float | None = Field(None, ge=0, le=30 * 86400, description="how long the replaced version is kept "
                                                                        "for a rollback (unset: the service's)")


class RollbackResponse(BaseModel):
    """What serves after a rollback."""

    collection: CollectionInfo
    removed_collection: str
    took_ms: float


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


class CollectionList(BaseModel):
    """Every collection, by name."""

    collections: list[CollectionInfo]


class CollectionDeleted(BaseModel):
    """What ``DELETE /v1/collections/{name}`` removed."""

    name: str
    collection: str
    documents: int
