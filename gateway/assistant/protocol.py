"""``/v1/assistant`` REST models (contract v1; fields only ever added)."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from gateway.answers.protocol import Citation
from gateway.http.models import Strict
from gateway.http.streams import Stream, TextDelta
from gateway.reasoning.protocol import LlmUsage
from services.runtime.tasks.post import DEFAULT_TIMEZONE, zone


class StartSession(Strict):
    """A session: what it may search, which tools it may call, its system text and model route (fixed at start)."""

    collections: list[str] = Field(default_factory=list, max_length=4,
                                   description="collections the `search` tool may read (the first is searched)")
    tools: list[str] | None = Field(None, max_length=32,
                                    description="the tools the session may call: `search`, declared tasks (GET "
                                                "/v1/tasks), backend tools (--assistant-tools-file); null: every "
                                                "one available")
    system: str = Field("", max_length=2000, description="added to the assistant's own instructions")
    model: str | None = Field(None, min_length=1, max_length=128, description="model route (default: the default)")
    caller: str = Field("", max_length=128, description="the caller's id, sent to backend tools and in their cache "
                                                        "key (never an API key)")
    reference_date: str | None = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$",
                                       description="the person's today (YYYY-MM-DD) that dates are read against "
                                                   "(default: today in the task's time zone)")

    timezone: str | None = Field(None, min_length=1, max_length=64, examples=["Asia/Seoul"],
                                 description=f"the person's IANA time zone, passed to every task that reads dates "
                                             f"(default {DEFAULT_TIMEZONE}); an unknown zone is a 400 naming it")

    @field_validator("timezone")
    @classmethod
    def _an_iana_zone(cls, value: str | None) -> str | None:
        if value is not None:
            zone(value)  # a ValueError naming the value is a 400 on `timezone`
        return value

    @field_validator("reference_date")
    @classmethod
    def _a_real_date(cls, value: str | None) -> str | None:
        if value is not None:
            date.fromisoformat(value)  # 2026-13-45 fits the pattern, not the calendar: a ValueError is a 400
        return value


class AssistantTurn(BaseModel):
    """One turn as kept: what the person said, what was called, the reply."""

    text: str
    tool: str | None = None
    arguments: dict | None = None
    reply: str
    citations: list[str] = Field(default_factory=list)
    answered_from: Literal["search", "tool", "session", "model"] | None = Field(
        None, description="where the reply came from: a checked search answer, the model after a tool, an earlier "
                          "result of the session that code found holds it, or the model alone (no document needed)")


class SessionState(BaseModel):
    """A session and its latest turns."""

    id: str
    collections: list[str]
    tools: list[str]
    model: str | None
    turns: list[AssistantTurn]
    earlier_turns: int = Field(0, description="turns before the first of `turns`, no longer kept")
    expires_in_s: int
    timezone: str = Field(DEFAULT_TIMEZONE, description="the time zone the session's tasks read dates in")



class Message(Strict):
    """One message of the person."""

    text: str = Field(min_length=1, max_length=4000, examples=["한빛소프트웨어 채용 절차가 어떻게 돼?"])


class ToolRefused(BaseModel):
    """``tool_refused``: code refuted the model's call (it is asked again once without that tool)."""

    name: str
    reason: str


class ToolCallEvent(BaseModel):
    """``tool_call``: the call the server runs now, with the arguments code kept."""

    name: str
    arguments: dict[str, Any]
    by: Literal["model", "code"] = Field(description="`code`: a question answered from memory became a search")


class ToolResultEvent(BaseModel):
    """``tool_result``: a summary of what the tool returned (not its payload), or its error."""

    name: str
    summary: str | None = None
    error: str | None = Field(None, description="the tool failed: shown to the model once; `error` ends the turn")
    cached: bool
    query: str | None = Field(None, description="`search`: the query it ran")


class AnswerEvent(BaseModel):
    """``answer``: the checked grounded answer of a ``search`` call (a refusal when the documents lack it)."""

    text: str
    answerable: bool
    reason: str
    check: str | None
    citations: list[Citation]


class TurnDone(BaseModel):
    """``done`` of an assistant turn."""

    turn: int
    tool: str | None = Field(description="the last tool called (null: none)")
    calls: list[str] = Field(description="every tool called, in order")
    answered_from: Literal["search", "tool", "session", "model"]
    session_check: str | None = Field(description="why the session's evidence did not hold a reply from memory")
    usage: list[LlmUsage]
    timings: dict[str, float]


STREAM = Stream({"delta": TextDelta, "tool_refused": ToolRefused, "tool_call": ToolCallEvent,
                 "tool_result": ToolResultEvent, "answer": AnswerEvent, "done": TurnDone},
                description="`tool_call`, `tool_result`, `answer` or the reply as `delta` events, then `done`; "
                            "or `error` (see the route's description)")
