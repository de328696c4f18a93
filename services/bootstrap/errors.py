"""The mesh's domain errors and the one table that maps them to gRPC status codes."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass(frozen=True)
class Violation:
    """One bad field: its path (``texts[3]``) and what is wrong with it."""

    field: str
    description: str


class MeshError(Exception):
    """Root of every error a service raises on purpose; each subclass has one gRPC code."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(MeshError):
    """The request is malformed; retrying it unchanged cannot succeed."""

    def __init__(self, message: str, violations: list[Violation] | None = None) -> None:
        super().__init__(message)
        self.violations = violations or []


class NotFound(MeshError):
    """The named resource does not exist."""


class Conflict(MeshError):
    """The resource already exists or changed underneath the caller."""


class FailedPrecondition(MeshError):
    """The system is not in a state where the operation can run (e.g. a model revision mismatch)."""


class Overloaded(MeshError):
    """The service is full right now; retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DependencyUnavailable(MeshError):
    """A backend this service needs (an engine, another service) cannot be reached."""


class DeadlineExceeded(MeshError):
    """The caller's deadline ran out before the work finished."""


class Cancelled(MeshError):
    """The caller went away."""


class InvalidOutput(MeshError):
    """A backend's answer broke its contract (e.g. a JSON schema) even after the allowed retry."""


# The one table: domain error -> gRPC code. Callers tell retryable from permanent by the code.
GRPC_CODES: dict[type[MeshError], grpc.StatusCode] = {
    InvalidInput: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    Conflict: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    DependencyUnavailable: grpc.StatusCode.UNAVAILABLE,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    Cancelled: grpc.StatusCode.CANCELLED,
    InvalidOutput: grpc.StatusCode.ABORTED,
}


def grpc_code_for(error: MeshError) -> grpc.StatusCode:
    """The gRPC code of a domain error (walking up its class tree)."""
    for cls in type(error).__mro__:
        if cls in GRPC_CODES:
            return GRPC_CODES[cls]
    return grpc.StatusCode.INTERNAL


def to_grpc_status(error: MeshError) -> grpc.Status:
    """A rich gRPC status: code, message and google.rpc details (BadRequest, RetryInfo)."""
    code = grpc_code_for(error)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=error.message)
    if isinstance(error, InvalidInput) and error.violations:
        detail = error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
            for v in error.violations
        ])
        status.details.add().Pack(detail)
    if isinstance(error, Overloaded):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_after_s * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return rpc_status.to_status(status)
