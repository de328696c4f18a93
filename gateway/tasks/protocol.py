"""``/v1/tasks`` REST models (contract v1; fields only ever added).

A task's own input and result are JSON objects whose schemas ``GET /v1/tasks`` lists, so they are
free-form here and validated by the task.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.http.models import Strict
from gateway.http.streams import Stream, TextDelta
from gateway.reasoning.protocol import Escalation, LlmUsage


class TaskFile(Strict):
    """A file whose text is one input field of a task."""

    content_base64: str = Field(min_length=1, description="the file's bytes, standard base64 (at most 20 MB decoded)")
    filename: str | None = Field(None, max_length=255, description="for your own bookkeeping; not used for its type")


class TaskRequest(Strict):
    """One run of a declared task."""

    input: dict[str, Any] = Field(description="the task's input, validated against its input_schema (GET /v1/tasks)",
                                  examples=[{"text": "[카카오] 1차 면접: 다음 주 화요일 오후 3시",
                                             "reference_date": "2026-03-04"}])
    model: str | None = Field(None, min_length=1, max_length=128,
                              description="model route (GET /v1/models); default: the route the task's role maps to")
    cache: bool = Field(True, description="false: neither read nor write the response cache for this run")
    session_id: str | None = Field(None, max_length=128, description="routes to the same reasoning instance")
    files: dict[str, TaskFile] | None = Field(
        None, max_length=4, description="input fields read from files: each key an input field (a string), its "
                                        "value the file whose text becomes that field (a PDF's text layer, OCR "
                                        "of a scan, a Word or HTML file: as `POST /v1/files:read` reads it)",
        examples=[{"resume": {"content_base64": "JVBERi0xLjcK…", "filename": "resume.pdf"}}])


class TaskExample(BaseModel):
    """An input the task accepts."""

    input: dict[str, Any]


class TaskInfo(BaseModel):
    """One declared task: what it takes, what it returns, how it runs."""

    name: str
    version: int = Field(description="bumped with every change of prompt or schema (part of the cache key)")
    description: str
    role: str = Field(description="the task's model role ('' = none); --task-routes maps roles to routes")
    route: str = Field(description="the model route it runs on when a request names none")
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] = Field(description="what the model writes (held to it by the backend's grammar)")
    result_schema: dict[str, Any] = Field(description="what a run returns as `result` (output after the post step)")
    post: str | None = Field(description="the step code runs on the output (dates, grade, overall score), if any")
    sampling: dict[str, Any]
    max_tokens: int
    deadline_s: float = Field(description="the run's deadline when no X-Request-Timeout-Ms is sent")
    cache_ttl_s: int | None = Field(description="how long results are cached; null: not cached")
    examples: list[TaskExample]


class TaskList(BaseModel):
    """Every declared task."""

    tasks: list[TaskInfo]


class TaskTimings(BaseModel):
    """Where the run's time went."""

    llm_ms: float = Field(description="the model's calls, all attempts")
    post_ms: float
    total_ms: float


class TaskResponse(BaseModel):
    """A task's validated result."""

    task: str
    version: int
    result: dict[str, Any] = Field(description="validated against the task's result_schema")
    cached: bool = Field(description="served from the response cache (no model call)")
    attempts: int = Field(description="model calls made: 1, or 2 when the first output broke the schema; 0 when cached")
    route: str = Field(description="the model route that wrote the result")
    usage: LlmUsage | None = None
    timings: TaskTimings
    escalation: Escalation | None = Field(None, description="the cheaper route whose output broke the schema twice "
                                                            "before `route` was asked (null: none)")


class RetryEvent(BaseModel):
    """``retry``: the output broke the task's schema; what was written so far is void, written again once."""

    attempt: int = Field(description="the attempt that starts now (2)")
    error: str = Field(description="what the first attempt broke")


class EscalateEvent(BaseModel):
    """``escalate``: the route's output broke the schema twice; the larger route writes it (what came is void)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    from_: str = Field(alias="from", description="the route whose output was refused")
    to: str = Field(description="the route asked now")
    reason: str = Field(description="`invalid_output`")


STREAM = Stream({"delta": TextDelta, "retry": RetryEvent, "escalate": EscalateEvent, "done": TaskResponse},
                description="`delta` events as the output is written (`retry` or `escalate` voids what came "
                            "before), then `done` with the validated output, or `error`")
