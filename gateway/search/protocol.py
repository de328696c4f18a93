"""Search's REST models (contract v1; fields are only ever added)."""

from __future__ import annotations

import math
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from clients.retrieval import Condition, Filter, FusionOptions
from gateway.http.errors import ApiError, FieldError
from gateway.http.models import Strict

MAX_QUERIES = 8
QueryText = Annotated[str, Field(min_length=1, max_length=2000)]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class FilterCondition(Strict):
    """One test on a declared payload field: exactly one of eq, any_of, or range bounds."""

    field: str = Field(min_length=1, max_length=64)
    eq: str | int | bool | None = Field(None, description="equals (keyword, integer or bool fields)")
    any_of: list[str] | None = Field(None, min_length=1, max_length=100, description="keyword is one of")
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None

    @field_validator("eq")
    @classmethod
    def _int64(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("an integer within int64")
        return value

    @field_validator("gte", "gt", "lte", "lt")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("a finite number")
        return value

    @model_validator(mode="after")
    def _one_test(self) -> FilterCondition:
        tests = [self.eq is not None, self.any_of is not None,
                 any(v is not None for v in (self.gte, self.gt, self.lte, self.lt))]
        if sum(tests) != 1:
            raise ValueError("give exactly one of eq, any_of, or range bounds")
        return self

    def to_condition(self) -> Condition:
        """The client's condition."""
        return Condition(field=self.field, eq=self.eq, any_of=self.any_of, gte=self.gte, gt=self.gt,
                         lte=self.lte, lt=self.lt)


class SearchFilter(Strict):
    """Documents pass when every ``must`` holds and no ``must_not`` does."""

    must: list[FilterCondition] = Field(default_factory=list, max_length=32)
    must_not: list[FilterCondition] = Field(default_factory=list, max_length=32)

    def to_filter(self) -> Filter:
        """The client's filter."""
        return Filter(must=[c.to_condition() for c in self.must], must_not=[c.to_condition() for c in self.must_not])


class FusionChoice(Strict):
    """How a hybrid search combines its legs (``auto`` when not given: no per-collection tuning)."""

    method: Literal["auto", "rrf", "dbsf", "weighted"] = "auto"
    rrf_k: int | None = Field(None, ge=1, le=1000, description="rrf: k in 1/(k + rank) (default 60)")
    dense_weight: float | None = Field(None, ge=0, le=1, description="weighted: the dense leg's weight")


class MmrChoice(Strict):
    """Diversify the results (maximal marginal relevance)."""

    diversity: float = Field(ge=0, le=1, description="0 = pure relevance, 1 = pure diversity")
    candidates: int | None = Field(None, ge=1, le=1000, description="hits considered before diversifying")


class ExpandChoice(Strict):
    """Ask the LLM for derived queries: ``n`` queries in all, the original always the first of them."""

    n: int = Field(3, ge=2, le=MAX_QUERIES, description="queries searched in all, the original included")
    model: str | None = Field(None, min_length=1, max_length=128,
                              description="the model route that writes them (default: the summaries route)")


def query_key(text: str) -> str:
    """What makes two queries the same: NFKC, case and runs of whitespace ignored."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class SearchRequest(Strict):
    """A hybrid (default), dense or keyword search."""

    collection: str = Field(min_length=1, max_length=64, examples=["books"])
    query: str | None = Field(None, min_length=1, max_length=2000, examples=["비 오는 날 읽기 좋은 소설"],
                              description="the query (give this or `queries`)")
    queries: list[QueryText] | None = Field(
        None, min_length=1, max_length=MAX_QUERIES,
        description="1 to 8 queries searched at once (one Embed call, legs concurrent) and merged by reciprocal "
                    "rank fusion across queries (k = 60): each hit says which queries found it")
    expand: ExpandChoice | None = Field(None, description="with `query`: add LLM-derived queries, searched as "
                                                          "`queries`; a failure searches the query alone, marked")
    top_k: int = Field(10, ge=1, le=100)
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    filter: SearchFilter | None = None
    fusion: FusionChoice | None = Field(None, description="hybrid only; default `auto`")
    mmr: MmrChoice | None = None
    score_threshold: float | None = Field(None, description="drop hits whose final score is below this")
    group_by: Literal["document", "passage"] = Field(
        "document", description="`document`: one hit per document, scored by its best passage (the passage that "
                                "matched is `passage`); `passage`: every matching passage of a long document is "
                                "its own hit (`text` is then the passage's)")

    @field_validator("queries")
    @classmethod
    def _distinct(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            seen: dict[str, int] = {}
            for i, text in enumerate(value):
                if query_key(text) in seen:
                    raise ValueError(f"queries[{i}] repeats queries[{seen[query_key(text)]}]")
                seen[query_key(text)] = i
        return value

    def texts(self) -> list[str]:
        """The queries to search (one for ``query``); 400 naming the field unless exactly one of the two is given."""
        if (self.query is None) == (self.queries is None):
            raise ApiError(400, "invalid_argument", "give exactly one of query and queries", fields=[
                FieldError(field="query", description="give exactly one of query and queries")])
        if self.expand is not None and self.query is None:
            raise ApiError(400, "invalid_argument", "expand derives queries from `query`", fields=[
                FieldError(field="expand", description="needs `query`, not `queries`")])
        return [self.query] if self.query is not None else list(self.queries or [])

    def fusion_options(self) -> FusionOptions | None:
        """The client's fusion options, or None for the service's defaults."""
        if self.fusion is None and self.mmr is None and self.score_threshold is None:
            return None
        f, m = self.fusion, self.mmr
        return FusionOptions(method=f.method if f else None, rrf_k=f.rrf_k if f else None,
                             dense_weight=f.dense_weight if f else None, mmr_diversity=m.diversity if m else None,
                             mmr_candidates=m.candidates if m else None, score_threshold=self.score_threshold)


class HitPassage(BaseModel):
    """Where a hit's passage lies in its document: ``text[start:end]`` of the document's whole text."""

    ordinal: int = Field(description="0 for the document's first passage")
    start: int = Field(description="character offset (Unicode code points) into the document's text")
    end: int
    passages: int = Field(description="passages the document has (1: the passage is the whole document)")
    text: str


class Hit(BaseModel):
    """One result; ranks are 1-based per leg, null when the leg did not return it."""

    id: str
    score: float
    text: str
    payload: dict[str, Any]
    passage: HitPassage | None = Field(
        None, description="the passage that matched (group_by `document`: `text` is the document's whole text), or "
                          "the passage the hit is (group_by `passage`: `text` is the passage's)")
    dense_rank: int | None
    keyword_rank: int | None
    dense_score: float | None = Field(None, description="the dense leg's cosine similarity (null: not returned "
                                                        "by that leg)")
    matched_queries: list[int] | None = Field(
        None, description="several queries: the indexes (into `queries` of the response) of those that found it")


class SearchTimings(BaseModel):
    """Milliseconds per stage."""

    embed_ms: float
    retrieval_ms: float
    total_ms: float
    cache_hit: bool


class QueryLeg(BaseModel):
    """One query of a several-query search, and how its leg ran."""

    query: str
    source: Literal["given", "derived"]
    mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    cache_hit: bool
    hits: int


class Expansion(BaseModel):
    """What became of ``expand``: ``ok`` (derived queries searched) or ``failed`` (the query alone, ``reason``)."""

    status: Literal["ok", "failed"]
    reason: str | None = None
    derived: int = Field(description="derived queries searched (beside the original)")
    ms: float


class SearchResponse(BaseModel):
    """Hits best first.

    ``degraded`` is true when the search ran keyword-only because the query could not be embedded
    in time (the response is still a correct keyword search).
    """

    hits: list[Hit]
    mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    timings: SearchTimings
    fusion: str | None = Field(None, description="the fusion that ran (hybrid only)")
    fusion_reason: str | None = Field(None, description="why that fusion ran")
    queries: list[QueryLeg] | None = Field(None, description="several queries (or expand): each query's leg")
    expansion: Expansion | None = Field(None, description="with expand: whether derived queries were had")
