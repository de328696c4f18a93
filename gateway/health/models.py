"""Health models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    """Liveness / readiness."""

    status: Literal["ok", "degraded", "unavailable"]
    services: dict[str, str] = Field(default_factory=dict)
