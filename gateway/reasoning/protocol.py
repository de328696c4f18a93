"""The LLM routes' REST models: recommendations, chat, summaries (contract v1; fields only added)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from gateway.http.models import Strict
from gateway.http.streams import Stream, TextDelta
from gateway.search.protocol import ExpandChoice, Expansion, SearchFilter


class LlmUsage(BaseModel):
    """Accounting of the LLM work behind a response."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float
    total_ms: float
    tokens_per_second: float
    cost_usd: float
    backend: str
    model: str
    estimated: bool = Field(description="token counts estimated (the backend reported none)")
    instance: str = Field(description="the reasoning instance that served the call")
    cached_prompt_tokens: int = Field(0, description="of prompt_tokens, those the backend read from its prompt "
                                                     "cache (0 when it does not say)")


class Escalation(BaseModel):
    """A cheaper route's output that code refused, before the route that answered was asked (once, same prompt)."""

    route: str = Field(description="the route whose output was refused")
    reason: Literal["unsupported", "invalid_output"] = Field(
        description="`unsupported`: an answer its sentences do not hold; `invalid_output`: broke its schema twice")
    usage: LlmUsage | None = Field(None, description="the refused call's usage (counted to the caller as well)")


class RecommendRequest(Strict):
    """Search a catalog, then explain every card in one LLM call."""

    collection: str = Field(min_length=1, max_length=64, examples=["demo"])
    query: str = Field(min_length=1, max_length=500, examples=["부모님께 드릴 선물 추천"])
    top_k: int = Field(5, ge=1, le=20)
    filter: SearchFilter | None = None
    reasons: bool = Field(True, description="write reasons (false: cards only)")
    session_id: str | None = Field(None, max_length=128, description="routes to the same reasoning instance")
    expand: ExpandChoice | None = Field(None, description="search LLM-derived queries too (merged across queries); "
                                                          "a failure searches the query alone, marked")


class Card(BaseModel):
    """A recommended item and why."""

    id: str
    score: float
    text: str
    payload: dict[str, Any]
    reason_short: str | None
    reason_long: str | None
    reason_status: Literal["ok", "regenerated", "failed"] | None = Field(
        None, description="whether the card's reasons passed the checks: `ok` at once, `regenerated` after one "
                          "regeneration, `failed` (the model's text never shown: reason_short and reason_long are "
                          "code's factual reason, reason_source `rule`, or null); null when no reasons were asked "
                          "for or produced")
    reason_violations: list[str] = Field(
        default_factory=list, description="the check kinds the first answer broke (`regenerated`) or the last one "
                                          "still breaks (`failed`): copy, foreign_item, not_korean, length, "
                                          "duplicate, repetition, missing")
    reason_source: Literal["model", "rule"] | None = Field(
        None, description="who wrote reason_short and reason_long: `model` (passed the checks) or `rule` (code's "
                          "short factual reason after the model's failed twice: the query's words the item holds, "
                          "its category, its price against the budget); null when there is no text")


class RecommendResponse(BaseModel):
    """Cards best first.

    ``reasons_status`` is ``failed`` (with ``reasons_error``) when the LLM could not answer in time:
    the cards are still the search result.
    """

    cards: list[Card]
    search_mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    reasons_status: Literal["ok", "skipped", "failed"]
    reasons_error: str | None = None
    usage: LlmUsage | None = None
    expansion: Expansion | None = Field(None, description="with expand: whether derived queries were searched")
    queries: list[str] | None = Field(None, description="with expand: the queries searched, the original first")


class ChatMessage(Strict):
    """An earlier turn."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=20000)


class ChatRequest(Strict):
    """One chat turn; history is append-only and sent back by the caller each turn."""

    session_id: str = Field(min_length=1, max_length=128, description="routes every turn to one instance")
    message: str = Field(min_length=1, max_length=20000)
    system: str = Field("", max_length=20000, description="keep it identical across turns (prefix cache)")
    history: list[ChatMessage] = Field(default_factory=list, max_length=200)
    max_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float | None = Field(None, ge=0, le=2)
    history_policy: Literal["refuse", "last_turns", "fit"] = Field(
        "refuse", description="a history over the budget: `refuse` it (400), keep the `last_turns` "
                              "(`history_turns` user turns and their answers), or keep the newest turns that `fit` "
                              "the budget; the `done` event says what was kept")
    history_turns: int = Field(5, ge=1, le=100, description="turns kept under `last_turns` (the seeds keep 5)")


class SummaryRequest(Strict):
    """A text to summarise (5 s deadline by default, never retried)."""

    text: str = Field(min_length=1, max_length=20000)
    max_sentences: int = Field(3, ge=1, le=10)
    session_id: str | None = Field(None, max_length=128)


class SummaryResponse(BaseModel):
    """The summary, or ``failed`` with an empty summary."""

    summary: str
    failed: bool
    failure_reason: str | None = None
    usage: LlmUsage | None = None


class ChatDone(BaseModel):
    """``done`` of a chat turn."""

    finish_reason: str = Field(description="`stop`, `length`, ...")
    usage: LlmUsage
    history: dict[str, Any] = Field(description="what the history policy kept: `policy`, `kept`, `dropped`")


CHAT_STREAM = Stream({"delta": TextDelta, "done": ChatDone},
                     description="`delta` events as the reply is written, then `done` or `error`")


class CardsEvent(BaseModel):
    """``cards``: the search's cards at once, before any reason."""

    cards: list[Card]
    search_mode: Literal["hybrid", "dense", "keyword"]
    degraded: bool
    expansion: Expansion | None = Field(None, description="with expand: whether derived queries were searched")
    queries: list[str] | None = Field(None, description="with expand: the queries searched, the original first")


class ReasonEvent(BaseModel):
    """``reason``: one card's reason as soon as it is known (also an entry of ``reasons``)."""

    id: str = Field(description="the card's id")
    short: str | None
    long: str | None
    status: Literal["ok", "regenerated", "failed"]
    violations: list[str]
    source: Literal["model", "rule"] | None = Field(description="who wrote the text (null: there is none)")


class ReasonsEvent(BaseModel):
    """``reasons``: every card's reason, in the cards' order."""

    reasons: list[ReasonEvent]


class RecommendDone(BaseModel):
    """``done`` of a recommendation stream."""

    reasons_status: Literal["ok", "skipped"]
    usage: LlmUsage | None = None


RECOMMEND_STREAM = Stream({"cards": CardsEvent, "reason": ReasonEvent, "reasons": ReasonsEvent,
                           "done": RecommendDone},
                          description="`cards` at once, one `reason` per card as it is known, `reasons` (all), "
                                      "`done`; or `error`")
