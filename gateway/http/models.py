"""The base of every REST model: valid Unicode text everywhere, unknown fields refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


def unicode_only(value: Any) -> Any:
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
        return unicode_only(value)


class Strict(UnicodeText):
    """Unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")
