"""Settings every service process shares; each service extends them with its own env prefix."""

from __future__ import annotations

import argparse
from typing import Any, Literal, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings

S = TypeVar("S", bound="ServiceSettings")


class ServiceSettings(BaseSettings):
    """Network, shutdown and telemetry settings. Precedence: CLI flag > environment > default."""

    host: str = Field("127.0.0.1", description="address to bind")
    port: int = Field(0, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    metrics_host: str = Field("127.0.0.1", description="address of the Prometheus endpoint")
    metrics_port: int = Field(-1, ge=-1, le=65535,
                              description="Prometheus /metrics port; 0 picks one, -1 disables")
    grace_period_s: float = Field(5.0, gt=0, description="how long SIGTERM waits for in-flight RPCs")
    trace_exporter: Literal["none", "console", "otlp"] = Field(
        "none", description="where spans go (otlp reads OTEL_EXPORTER_OTLP_ENDPOINT)")
    log_level: str = Field("INFO", description="Python log level")


def settings_from_cli(cls: type[S], prog: str, argv: list[str] | None = None) -> S:
    """Build settings once: a ``--flag`` for every field (documented with its env var) over env/defaults."""
    prefix = cls.model_config.get("env_prefix", "")
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    for name, field in cls.model_fields.items():
        env = f"{prefix}{name}".upper()
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                            help=f"{field.description or name} [env {env}; default {field.default!r}]")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {k: v for k, v in vars(args).items() if v is not None}
    return cls(**overrides)
