"""One error body for every failure, and the one table from gRPC codes to HTTP statuses."""

from __future__ import annotations

import grpc
from pydantic import BaseModel, Field

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
