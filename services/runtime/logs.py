"""One JSON log line format in every process (python-json-logger).

Every line carries ``timestamp``, ``level``, ``service``, ``logger``, ``message``, the request id
(``X-Request-ID`` at the gateway, carried to the services as W3C baggage ``mesh.request_id``) and the
current trace and span ids, so a log line leads to its trace. Extra fields given with
``log.info(..., extra={...})`` become JSON fields. Nothing here may log user text: callers pass ids,
counts and timings only.
"""

from __future__ import annotations

import contextvars
import logging
import sys

from opentelemetry import baggage, trace
from pythonjsonlogger.json import JsonFormatter

REQUEST_ID_BAGGAGE = "mesh.request_id"
_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("mesh_request_id", default="")


def set_request_id(request_id: str) -> contextvars.Token[str]:
    """Bind ``request_id`` to the current context (the gateway does this per request)."""
    return _REQUEST_ID.set(request_id)


def reset_request_id(token: contextvars.Token[str]) -> None:
    """Undo :func:`set_request_id`."""
    _REQUEST_ID.reset(token)


def current_request_id() -> str:
    """The request id of the current context: set here, or received as baggage from the caller."""
    rid = _REQUEST_ID.get()
    if rid:
        return rid
    value = baggage.get_baggage(REQUEST_ID_BAGGAGE)
    return str(value) if value else ""


class ContextFields(logging.Filter):
    """Adds service, request id, trace id and span id to every record."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        record.service = self.service
        record.request_id = current_request_id()
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else ""
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else ""
        return True


def json_handler(service: str, stream=None) -> logging.Handler:
    """A handler writing one JSON object per line with the context fields."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFields(service))
    handler.setFormatter(JsonFormatter(
        ["asctime", "levelname", "service", "name", "message", "request_id", "trace_id", "span_id"],
        rename_fields={"asctime": "timestamp", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%S%z", json_ensure_ascii=False))
    return handler


def configure_logging(service: str, level: str) -> None:
    """Send every logger of the process through one JSON handler (replacing any earlier set-up)."""
    root = logging.getLogger()
    root.handlers[:] = [json_handler(service)]
    root.setLevel(level)
