"""One error body for every failure, the one table from gRPC codes to HTTP statuses, and the handlers.

Routes and serving classes never catch a client error to translate it: :func:`install` registers one
handler for :class:`clients.errors.MeshClientError` (and one each for our own :class:`ApiError`, schema
violations and unknown paths), so every failure leaves through the same table with the same body.
"""

from __future__ import annotations

from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from clients.errors import MeshClientError

# gRPC code -> HTTP status (DESIGN.md). Anything not listed is 500.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


class FieldError(BaseModel):
    """One bad field."""

    field: str = Field(description="path of the field, e.g. `query` or `documents[2].id`")
    description: str


class ErrorDetail(BaseModel):
    """The error."""

    code: str = Field(description="machine-readable code, e.g. `invalid_argument`, `unavailable`")
    message: str
    retryable: bool = Field(description="whether the same request may succeed later")
    fields: list[FieldError] = Field(default_factory=list)
    retry_after_s: float | None = None


class ErrorBody(BaseModel):
    """Every non-2xx response of the gateway has this body."""

    error: ErrorDetail


class ApiError(Exception):
    """An error that becomes an HTTP response with :class:`ErrorBody`."""

    def __init__(self, status: int, code: str, message: str, *, retryable: bool = False,
                 fields: list[FieldError] | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=ErrorDetail(code=code, message=message, retryable=retryable,
                                                fields=fields or [], retry_after_s=retry_after_s))


def from_client_error(err) -> ApiError:
    """Translate a ``clients`` error (carrying a gRPC code) through the table."""
    status = HTTP_STATUS.get(err.code, 500)
    fields = [FieldError(field=v.field, description=v.description) for v in getattr(err, "violations", [])]
    return ApiError(status, err.code.name.lower(), err.message, retryable=status in (429, 503, 504),
                    fields=fields, retry_after_s=getattr(err, "retry_after_s", None))


def documented(*codes: int, described: bool = True) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these statuses, each with the :class:`ErrorBody` model.

    ``described=False`` keeps FastAPI's stock descriptions (the LLM and OCR routes were frozen that way).
    """
    return {code: {"model": ErrorBody, **({"description": DESCRIPTIONS[code]} if described else {})}
            for code in codes}


DESCRIPTIONS = {
    400: "invalid request (fields named in `error.fields`)", 401: "missing or wrong API key",
    404: "unknown collection, job or model", 409: "conflict or failed precondition",
    413: "request body too large", 422: "request body does not match the schema",
    429: "overloaded; retry after `error.retry_after_s`", 499: "client closed the request",
    502: "the model's output broke the schema it was held to, after one regeneration (`invalid_output`)",
    503: "a required service is unavailable", 504: "the request deadline passed"}


def job_submit_error(err: Exception) -> ApiError:
    """A job store's refusal at submit, as the caller is told it: when to come back in every case.

    Too many jobs waiting (``QueueFull``) is a 429; the store at its memory bound (``JobStoreFull``: Redis
    at ``maxmemory`` with ``noeviction``, freed as jobs finish) and the store down are 503s.
    """
    from services.runtime.jobs import JobStoreFull, QueueFull

    if isinstance(err, QueueFull):
        return ApiError(429, "resource_exhausted", str(err), retryable=True, retry_after_s=5.0)
    if isinstance(err, JobStoreFull):
        return ApiError(503, "unavailable", f"{err} (jobs that finish free it)", retryable=True, retry_after_s=30.0)
    return ApiError(503, "unavailable", str(err), retryable=True, retry_after_s=5.0)


def error_response(exc: ApiError, openai_shape: bool = False) -> JSONResponse:
    """The HTTP response of an error; a retryable refusal (429/503) says when to come back."""
    error = exc.body.error
    headers = None
    if error.retry_after_s or (error.retryable and exc.status in (429, 503)):
        headers = {"Retry-After": str(max(1, round(error.retry_after_s or 1)))}
    body = openai_error_body(exc) if openai_shape else exc.body.model_dump()
    return JSONResponse(body, status_code=exc.status, headers=headers)


def _openai(request: Request) -> bool:
    return request.url.path in OPENAI_SHAPED_PATHS


# Routes whose errors take OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``), so the
# official client and the frameworks over it raise their own typed errors.
OPENAI_SHAPED_PATHS = frozenset({"/v1/chat/completions"})
OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 409: "invalid_request_error", 413: "invalid_request_error",
                429: "rate_limit_error"}


def openai_error_body(exc: ApiError) -> dict[str, Any]:
    """An error in OpenAI's shape: ``param`` the first bad field, ``code`` the mesh's code (or a sharper one)."""
    error = exc.body.error
    param = error.fields[0].field.removeprefix("options.") if error.fields else None
    code = error.code
    if any(f.description.startswith("context_length_exceeded") for f in error.fields):
        code, param = "context_length_exceeded", "messages"
    elif code == "invalid_argument" and any("Extra inputs are not permitted" in f.description for f in error.fields):
        code = "unsupported_parameter"
    detail = "; ".join(f"{f.field}: {f.description}" for f in error.fields[:3])
    message = f"{error.message} ({detail})" if detail and detail not in error.message else error.message
    return {"error": {"message": message, "type": OPENAI_TYPES.get(exc.status, "server_error" if exc.status >= 500
                                                                     else "invalid_request_error"),
                      "param": param, "code": code}}


def _schema_field(loc: tuple) -> str:
    """``("body", "documents", 0, "id")`` -> ``documents[0].id`` (the REST field path every error uses)."""
    out = ""
    for part in loc:
        if part == "body":
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def install(app: FastAPI) -> None:
    """Register the gateway's exception handlers on ``app``."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc, _openai(request))

    async def client_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(from_client_error(exc), _openai(request))

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        fields = [FieldError(field=_schema_field(tuple(e["loc"])), description=e["msg"]) for e in exc.errors()]
        return error_response(ApiError(400, "invalid_argument", "request does not match the schema", fields=fields),
                              _openai(request))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(ApiError(exc.status_code, code, str(exc.detail)), _openai(request))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(MeshClientError, client_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
