"""``/v1/answers``' REST models (contract v1; fields only ever added)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from gateway.http.models import Strict
from gateway.http.streams import Stream, TextDelta
from gateway.reasoning.protocol import Escalation, LlmUsage
from gateway.search.protocol import SearchFilter


class AnswerTurn(Strict):
    """An earlier turn of the conversation."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=4000)


class AnswerRequest(Strict):
    """A question answered from a collection's documents only, citing them."""

    collection: str = Field(min_length=1, max_length=64, examples=["docs"])
    question: str = Field(min_length=1, max_length=2000, examples=["연차는 며칠까지 이월할 수 있나요?"])
    history: list[AnswerTurn] = Field(default_factory=list, max_length=20,
                                      description="earlier turns: the question is first rewritten into a "
                                                  "standalone one (the last 3 exchanges are read)")
    filter: SearchFilter | None = None
    top_k: int = Field(5, ge=1, le=10, description="documents retrieved")
    min_score: float | None = Field(None, ge=-1, le=1,
                                    description="similarity floor (dense cosine): documents below it are not used; "
                                                "default: the gateway's --answer-min-score")
    min_relevance: float | None = Field(None, ge=0, le=1,
                                        description="the relevance decision's threshold (0: always ask the model); "
                                                    "default: the gateway's --answer-min-relevance")
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid"
    model: str | None = Field(None, min_length=1, max_length=128, description="model route (GET /v1/models)")
    session_id: str | None = Field(None, max_length=128, description="routes to the same reasoning instance")
    cache: bool = Field(True, description="the semantic answer cache: false never serves a cached answer nor "
                                          "stores this one")


class AnswerPassage(BaseModel):
    """A passage given to the model: a window of one document, ``[start, end)`` in its text."""

    n: int = Field(description="the number the answer cites it by")
    id: str
    start: int
    end: int
    text: str
    score: float
    dense_score: float | None
    payload: dict[str, Any]


class Citation(BaseModel):
    """A sentence the answer rests on, checked by code to hold it: ``[start, end)`` in the document's text."""

    n: int = Field(description="the passage it is in")
    sentence: int | None = Field(None, description="its number in the prompt (sentences are numbered across "
                                                   "passages)")
    id: str
    start: int
    end: int
    text: str
    payload: dict[str, Any]
    page: int | None = Field(None, description="the page it is on (1-based), for a document stored from a file "
                                               "(`POST /v1/collections/{name}/files`)")


class Rewrite(BaseModel):
    """The standalone question: ``skipped`` (no history), ``ok``, or ``failed`` (the turn searched as written)."""

    status: Literal["skipped", "ok", "failed"]
    query: str
    reason: str | None = None
    ms: float


class AnswerTimings(BaseModel):
    """Milliseconds per stage."""

    rewrite_ms: float
    search_ms: float
    llm_ttft_ms: float | None
    total_ms: float
    check_ms: float | None = Field(None, description="the support checks of a proposed answer")
    cache_ms: float | None = Field(None, description="the answer cache's lookup (null: not looked up)")


class AnswerRelevance(BaseModel):
    """Whether the passages can answer at all, decided before the LLM (a fitted logistic regression)."""

    score: float = Field(description="the probability that the passages hold the answer")
    threshold: float = Field(description="below it the model is not asked (`reason: not_relevant`)")
    features: dict[str, float] = Field(description="`cos1`, `margin`, `cover_top`, `cover_all`, `legs_agree`")


class AnswerSupport(BaseModel):
    """What the code found checking the model's answer against the sentences it named."""

    check: Literal["supported", "no_evidence", "number_not_in_evidence", "answer_not_in_evidence",
                   "question_not_covered", "subject_not_in_evidence", "qualifier_mismatch", "answer_type"] = Field(
        description="the check that refused the answer (subject_not_in_evidence: the question's subject is not in "
                    "the evidence or its passage's title; qualifier_mismatch: an ordinal or a year of the question "
                    "is not the evidence's; answer_type: not the kind of answer the question asks for), or "
                    "supported")
    answer_terms: float = Field(description="share of the answer's content terms found in its evidence")
    question_terms: float = Field(description="share of the question's content terms the evidence covers")
    numbers_missing: list[str] = Field(description="numbers of the answer its evidence does not hold")


class AnswerCacheHit(BaseModel):
    """The cached question whose checked answer was served, and how close its vector was."""

    question: str
    similarity: float


class AnswerResponse(BaseModel):
    """The answer and what it rests on.

    ``answerable`` is false, with ``answer`` empty, when no document clears the floor
    (``reason: no_passages``), the passages cannot hold it by the relevance decision (``not_relevant``, the
    model is not asked), the model says the passages do not hold the answer
    (``not_in_passages``), or the sentences it names do not hold its answer or do not cover the
    question (``unsupported``, see ``support``); the mesh never answers from the model's memory instead.
    """

    answerable: bool
    answer: str
    reason: Literal["answered", "no_passages", "not_relevant", "not_in_passages", "unsupported"]
    citations: list[Citation]
    citations_removed: int = Field(description="evidence numbers that named no sentence, removed")
    support: AnswerSupport | None = Field(None, description="the checks of a proposed answer (null when the "
                                                            "model proposed none)")
    relevance: AnswerRelevance | None = Field(None, description="the decision before the LLM (null: not made, "
                                                                "e.g. a keyword-only search has no cosine)")
    passages: list[AnswerPassage]
    dropped: dict[str, int] = Field(description="documents not used: `below_floor`, `near_duplicate`")
    rewrite: Rewrite
    search_mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool = Field(description="the search ran keyword-only (the question could not be embedded)")
    timings: AnswerTimings
    usage: LlmUsage | None = None
    cached: Literal["semantic"] | None = Field(None, description="`semantic`: served from the answer cache (the "
                                                                 "model was not asked; `usage` is null)")
    cache: AnswerCacheHit | None = Field(None, description="the cached question served and its cosine")
    answered_by: str | None = Field(None, description="the model route that wrote the answer (null: no model asked)")
    escalation: Escalation | None = Field(None, description="the cheaper route's answer code refused before "
                                                            "`answered_by` was asked (null: none)")


class PassageShown(BaseModel):
    """A passage the answer may cite, as the stream shows it first."""

    n: int = Field(description="the number the answer cites it by")
    id: str
    start: int
    end: int
    text: str


class PassagesEvent(BaseModel):
    """``passages``: what the question was searched as and the passages found, before any answer."""

    query: str
    rewrite: Rewrite
    search_mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    passages: list[PassageShown]


STREAM = Stream({"passages": PassagesEvent, "delta": TextDelta, "done": AnswerResponse},
                description="`passages` at once; once the answer passed its checks, its text as one `delta`; "
                            "`done` (the whole response); or `error`")
