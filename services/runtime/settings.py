"""Settings every service process shares; each service extends them with its own env prefix."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Literal, NoReturn, TypeVar

from pydantic import Field, FilePath, SecretStr, ValidationError
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
    trace_exporter: Literal["none", "console", "otlp"] | None = Field(
        None, description="where spans go; unset: OTEL_TRACES_EXPORTER, else none (otlp reads "
                          "OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Python log level")
    health_interval_s: float = Field(2.0, gt=0, le=300,
                                     description="how often dependencies are probed for health per capability")
    debug: bool = Field(False, description="print tracebacks for start-up errors (a flag: --debug)")
    workers: int = Field(1, ge=1, le=64, description="worker processes serving the same port (SO_REUSEPORT); "
                                                     "with more than 1 this process supervises them")
    reuse_port: bool = Field(False, description="bind with SO_REUSEPORT (set by the supervisor for its workers)")
    tls_cert_file: FilePath | None = Field(None, description="serve TLS with this certificate (PEM; with "
                                                             "--tls-key-file); unset: plaintext")
    tls_key_file: FilePath | None = Field(None, description="the certificate's private key (PEM)")
    tls_client_ca_file: FilePath | None = Field(None, description="require client certificates signed by this CA "
                                                                  "(mutual TLS); needs --tls-cert-file")
    loop_stall_ms: float = Field(0.0, ge=0, le=60_000, description="report every callback that holds the event "
                                 "loop longer than this (a WARNING with the stack that held it, and "
                                 "mesh_event_loop_stalls_total); 0 = off")
    loop_stall_file: str = Field("", description="also append each such report to this file (the test suite's "
                                 "event-loop guard reads it)")
    reflection: bool = Field(True, description="serve gRPC reflection (grpcurl without protos); "
                                               "--no-reflection hides the schema")


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    """Print ``prog: error: message`` on one line to stderr and exit (2: the configuration is wrong)."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def settings_from_cli(cls: type[S], prog: str, argv: list[str] | None = None) -> S:
    """Build settings once: a ``--flag`` for every field (documented with its env var) over env/defaults.

    An invalid value, from a flag or the environment, ends the process with one line naming the
    setting, its flag and variable, and what is wrong (exit 2), never a traceback.
    """
    prefix = cls.model_config.get("env_prefix", "")
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    secrets = []
    for name, field in cls.model_fields.items():
        env = f"{prefix}{name}".upper()
        flag = f"--{name.replace('_', '-')}"
        if field.annotation is SecretStr:  # never on a command line (readable in /proc/<pid>/cmdline)
            secrets.append(f"{env} ({field.description})")
            continue
        if field.annotation is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None,
                                help=f"{field.description or name} [env {env}; default {field.default!r}]")
            continue
        parser.add_argument(flag, dest=name, default=None,
                            help=f"{field.description or name} [env {env}; default {_default(field)}]")
    if secrets:
        parser.epilog = "secrets, from the environment only:\n  " + "\n  ".join(secrets)
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {k: v for k, v in vars(args).items() if v is not None}
    try:
        return cls(**overrides)
    except ValidationError as exc:
        fail(prog, "; ".join(_explain(err, prefix, overrides) for err in exc.errors()))


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return "computed"
    return repr(field.default)


def _explain(err: Any, prefix: str, overrides: dict[str, Any]) -> str:
    name = str(err["loc"][0]) if err.get("loc") else "?"
    source = f"--{name.replace('_', '-')}" if name in overrides else f"{prefix}{name}".upper()
    return f"invalid setting {name} (from {source}, value {err.get('input')!r}): {err['msg']}"
