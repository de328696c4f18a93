"""`/v1/chat/completions`' REST models: OpenAI's request and response shapes, the supported part of them.

A field OpenAI defines that the mesh does not support (``n`` other than 1, ``logprobs``, penalties, audio
...) is refused with 400 naming it, never ignored: :data:`UNSUPPORTED` lists what is refused and why.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.http.models import UnicodeText
from gateway.http.streams import Stream


class _Strict(UnicodeText):
    model_config = ConfigDict(extra="forbid")


class CompletionTextPart(_Strict):
    """A text part of a message's content (other part types, images included, are not supported)."""

    type: Literal["text"]
    text: str


class CompletionFunctionCall(_Strict):
    """A function call's name and arguments (JSON text)."""

    name: str = Field(max_length=64)
    arguments: str = Field("", max_length=100_000)


class CompletionToolCall(_Strict):
    """One tool call of an assistant message."""

    id: str = Field(max_length=128)
    type: Literal["function"] = "function"
    function: CompletionFunctionCall


class CompletionMessage(_Strict):
    """A message: ``system`` (or ``developer``), ``user``, ``assistant`` (maybe with ``tool_calls``) or ``tool``."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[CompletionTextPart] | None = None
    name: str | None = Field(None, max_length=64)
    tool_calls: list[CompletionToolCall] | None = Field(None, max_length=32)
    tool_call_id: str | None = Field(None, max_length=128)
    refusal: str | None = None  # echoed back by clients that replay an assistant message

    def text(self) -> str:
        """The content as one string (text parts joined)."""
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class CompletionFunction(_Strict):
    """A function the model may call."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = Field(None, max_length=4000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CompletionTool(_Strict):
    """A tool (only functions)."""

    type: Literal["function"] = "function"
    function: CompletionFunction


class CompletionNamedFunction(_Strict):
    """The function a named tool choice names."""

    name: str


class CompletionNamedToolChoice(_Strict):
    """``{"type": "function", "function": {"name": ...}}``."""

    type: Literal["function"] = "function"
    function: CompletionNamedFunction


class CompletionJsonSchema(_Strict):
    """The schema of a ``json_schema`` response format."""

    name: str = Field(max_length=64)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CompletionResponseFormat(_Strict):
    """``text``, ``json_object`` or ``json_schema``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: CompletionJsonSchema | None = None


class CompletionStreamOptions(_Strict):
    """Streaming options."""

    include_usage: bool | None = None


class ChatCompletionRequest(_Strict):
    """OpenAI's chat completion request: ``model`` names a model route (GET /v1/models lists them)."""

    model: str = Field(min_length=1, max_length=128, examples=["local"])
    messages: list[CompletionMessage] = Field(min_length=1, max_length=256)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    max_completion_tokens: int | None = Field(None, ge=1, le=1_000_000)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-(2**63), lt=2**63)
    user: str | None = Field(None, max_length=128, description="routes to the same reasoning instance")
    stream: bool | None = False
    stream_options: CompletionStreamOptions | None = None
    response_format: CompletionResponseFormat | None = None
    tools: list[CompletionTool] | None = Field(None, max_length=32)
    tool_choice: Literal["auto", "none", "required"] | CompletionNamedToolChoice | None = None
    parallel_tool_calls: bool | None = Field(None, description="accepted; an answer holds at most one call")
    n: int | None = Field(None, ge=0, le=128, description="only 1")
    logprobs: bool | None = Field(None, description="only false")
    top_logprobs: int | None = Field(None, ge=0, le=20, description="not supported")
    frequency_penalty: float | None = Field(None, description="only 0")
    presence_penalty: float | None = Field(None, description="only 0")
    logit_bias: dict[str, float] | None = Field(None, description="not supported")


# field -> (the values accepted, why the rest is refused)
UNSUPPORTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "n": ((None, 1), "only n=1 is supported (one choice per request)"),
    "logprobs": ((None, False), "logprobs are not supported"),
    "top_logprobs": ((None,), "logprobs are not supported"),
    "frequency_penalty": ((None, 0, 0.0), "penalties are not supported"),
    "presence_penalty": ((None, 0, 0.0), "penalties are not supported"),
    "logit_bias": ((None,), "logit_bias is not supported"),
}


class CompletionResponseFunctionCall(BaseModel):
    """A call's name and JSON arguments."""

    name: str
    arguments: str


class CompletionResponseToolCall(BaseModel):
    """One tool call of the answer."""

    id: str
    type: Literal["function"] = "function"
    function: CompletionResponseFunctionCall


class CompletionResponseMessage(BaseModel):
    """The answer."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[CompletionResponseToolCall] | None = None
    refusal: str | None = None


class CompletionChoice(BaseModel):
    """The one choice."""

    index: int = 0
    message: CompletionResponseMessage
    finish_reason: Literal["stop", "length", "tool_calls"]
    logprobs: None = None


class CompletionUsage(BaseModel):
    """Tokens of the call (all LLM calls behind it, a regeneration included)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int] | None = Field(
        None, description="`cached_tokens`: of prompt_tokens, those the backend read from its prompt cache")


class ChatCompletion(BaseModel):
    """OpenAI's ``chat.completion``."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage
    system_fingerprint: str | None = None


class OpenAiErrorDetail(BaseModel):
    """OpenAI's error detail."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAiError(BaseModel):
    """OpenAI's error body (the body of every error of `/v1/chat/completions`)."""

    error: OpenAiErrorDetail


class ChunkToolCall(BaseModel):
    """A tool call in a chunk (whole: the mesh sends each call once, validated)."""

    index: int
    id: str
    type: Literal["function"] = "function"
    function: CompletionResponseFunctionCall


class ChunkDelta(BaseModel):
    """What a chunk adds to the answer (only the fields it sets are sent)."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ChunkToolCall] | None = None


class ChunkChoice(BaseModel):
    """The one choice of a chunk."""

    index: int = 0
    delta: ChunkDelta
    finish_reason: Literal["stop", "length", "tool_calls"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    """OpenAI's ``chat.completion.chunk``; the last, with ``stream_options.include_usage``, has no choices."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


STREAM = Stream({"chunk": ChatCompletionChunk, "error": OpenAiError}, unnamed=True, data_only=("[DONE]",),
                exclude_unset=True,
                description="`chat.completion.chunk` events ending in `data: [DONE]` (a failure after the start: "
                            "one `data: {\"error\": ...}` line instead)")
