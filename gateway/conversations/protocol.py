"""``/v1/conversations`` REST models (contract v1; fields only ever added)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from gateway.http.models import Strict
from gateway.http.streams import Stream, TextDelta
from gateway.interviews.protocol import not_blank
from gateway.reasoning.protocol import Card, LlmUsage

Word = Field(min_length=1, max_length=40)
CATEGORIES = ["향수", "꽃", "케이크", "와인", "향초", "지갑", "시계"]
ATTRIBUTES = ["알코올", "견과류", "각인", "비건", "가죽"]

LATE = "deadline_exceeded"  # every way of running out of time (first token, generation, total, the request's)


class ProfileFields(Strict):
    """The collection's payload fields the profile filters on."""

    price: str = Field("price", min_length=1, max_length=64, description="integer field: the budget's range")
    category: str = Field("category", min_length=1, max_length=64, description="keyword field: excluded categories")
    attributes: str = Field("tags", min_length=1, max_length=64,
                            description="keyword field (one value or a list): must-have and forbidden attributes")


class StartConversation(Strict):
    """A new conversation over a collection, with the collection's vocabulary."""

    collection: str = Field(min_length=1, max_length=64, examples=["gifts"])
    categories: list[str] = Field(default_factory=list, max_length=100, examples=[CATEGORIES],
                                  description="the collection's categories: the only ones a profile holds")
    attributes: list[str] = Field(default_factory=list, max_length=100, examples=[ATTRIBUTES],
                                  description="the collection's attribute tags: the only ones a profile holds")
    fields: ProfileFields = Field(default_factory=ProfileFields)
    model: str | None = Field(None, min_length=1, max_length=128,
                              description="model route of the turn extraction (default: the route the "
                                          "`conversation` role maps to)")

    @field_validator("categories", "attributes")
    @classmethod
    def _words(cls, value: list[str]) -> list[str]:
        for word in value:
            if not 1 <= len(word.strip()) <= 40:
                raise ValueError("each word: 1 to 40 characters")
        return list(dict.fromkeys(w.strip() for w in value))


class TurnRequest(Strict):
    """What the user said."""

    text: str = Field(min_length=1, max_length=1000, examples=["예산은 10만 원 정도예요"])
    top_k: int = Field(10, ge=1, le=50)
    reasons: bool = Field(False, description="write a reason for each hit (one LLM call; at most 20 hits)")

    _blank = field_validator("text")(not_blank)


class Profile(BaseModel):
    """What the conversation asks for, kept by code."""

    recipient: str | None
    occasion: str | None
    budget_min: int | None = Field(description="won; read from the turns by code")
    budget_max: int | None
    categories: list[str] = Field(description="wanted (soft: the query)")
    excluded_categories: list[str] = Field(description="never in the hits (a filter)")
    must_have: list[str] = Field(description="attributes every hit has (a filter)")
    forbidden: list[str] = Field(description="attributes no hit has (a filter)")
    keywords: list[str]
    excluded_keywords: list[str] = Field(description="words the user took back (kept out of the query)")


class TurnSearch(BaseModel):
    """The search the profile implied."""

    query: str | None = None
    queries: list[str] | None = None
    filter: dict[str, Any] | None = None


class TurnTimings(BaseModel):
    """Where the turn's time went."""

    extraction_ms: float
    search_ms: float
    total_ms: float


class TurnResponse(BaseModel):
    """The profile after the turn, the search it ran and the hits."""

    id: str
    turn: int
    profile: Profile
    notes: list[str] = Field(description="what code kept, ignored or resolved in this turn (e.g. an exclusion "
                                         "that beat an inclusion)")
    proposed: dict[str, Any] = Field(description="the model's proposal (spec_delta), before code checked it")
    search: TurnSearch
    hits: list[Card]
    search_mode: str
    degraded: bool
    reasons_status: str = Field(description="skipped, ok or failed (the hits stand either way)")
    usage: LlmUsage | None = Field(None, description="the extraction's LLM work (TTFT, tokens)")
    timings: TurnTimings


class Turn(BaseModel):
    """One turn as stored."""

    text: str
    notes: list[str]


class ConversationState(BaseModel):
    """A conversation as stored: its profile and its latest turns (the gateway's --conversation-max-turns)."""

    id: str
    collection: str
    profile: Profile
    turns: list[Turn]
    earlier_turns: int = Field(0, description="turns before the first of `turns`, no longer kept (their effect "
                                              "stays in the profile)")
    expires_in_s: int


class Confirmation(BaseModel):
    """The confirm screen: the frozen profile, display keywords and the summary (null when it failed or was late)."""

    id: str
    turn: int = Field(description="the turn whose profile was confirmed")
    profile: Profile
    keywords: list[str] = Field(description="chosen by code from the profile, at most 8: who, why, what, how "
                                            "much, then what is left out")
    summary: str | None = Field(description="the response model's, asked once within --conversation-summary-"
                                            "timeout-s; null when late, failed or naming a number or a name "
                                            "outside the profile")
    summary_error: str | None = Field(None, description="why the summary is null")
    summary_ms: float
    confirmed_unix_ms: int
    already: bool = Field(description="true: confirmed before (this is the stored confirmation)")
    usage: LlmUsage | None = None


class Reopened(BaseModel):
    """A confirmed conversation opened again for corrections (seed 004, E8)."""

    id: str
    profile: Profile = Field(description="the confirmed profile the corrections start from")
    confirmed_turn: int = Field(description="the turn whose profile had been confirmed")
    corrections_left: int = Field(description="turns accepted before the profile must be confirmed again")
    reopened: int = Field(description="how many times this conversation has been reopened (at most 3)")
    already: bool = Field(description="true: it was open already (reopened by an earlier call, not confirmed since)")


class ListsRequest(Strict):
    """How to build the lists of a confirmed conversation."""

    top_k: int = Field(5, ge=1, le=20, description="items per list")
    reasons: bool = Field(True, description="one reason call per query (a failed call loses only its items' reason)")
    derived: int = Field(2, ge=0, le=4, description="derived queries the model adds to the gift list's (0: none)")
    diversity: float = Field(0.3, ge=0, le=1, description="MMR: 0 = pure relevance; at most 0.1 when the profile "
                                                          "names categories (their own queries spread the list)")


class ListsJob(BaseModel):
    """A list job: state, progress (4 stages: queries, embedding, search, reasons) and, when done, the lists."""

    id: str
    conversation: str
    state: str = Field(description="queued, running, done, failed or cancelled")
    done: int
    total: int
    errors: list[str]
    result: dict[str, Any] | None = Field(
        None, description="`gift` (for the recipient) and `self` (for the person asking): items best first, each "
                          "with the query that found it, a reason and its `reason_source`: `model` (the query's "
                          "sentence, checked to describe every item under it) or `rule` (written by code from "
                          "the profile and the item when the model's failed); `queries` with each model reason's "
                          "status; `expansion`; `timings` per stage")


class ReplyEvent(BaseModel):
    """``reply``: the reply once written and checked (null text when late, failed or unfaithful)."""

    text: str | None
    asked: list[str] = Field(description="what code found missing and the reply asks for")
    error: str | None = Field(description="why there is no reply: `deadline_exceeded`, `unfaithful: ...`, ...")
    ms: float
    usage: LlmUsage | None = None


TURN_STREAM = Stream({"turn": TurnResponse, "delta": TextDelta, "reply": ReplyEvent},
                     description="`turn` (the profile and its search, at once), the reply as `delta` events while "
                                 "it is written, then `reply`; or `error`")
