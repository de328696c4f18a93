"""The OpenAI-compatible routes' REST models (`/v1/embeddings`, `/v1/models`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gateway.http.models import UnicodeText


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
