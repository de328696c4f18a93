"""One root exception for client calls, with a subclass per kind of failure a caller handles."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


@dataclass(frozen=True)
class FieldViolation:
    """A bad field named by the server."""

    field: str
    description: str


class MeshClientError(Exception):
    """Any failed call; ``code`` is the gRPC status code."""

    retryable = False

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class InvalidArgument(MeshClientError):
    """The request was rejected; ``violations`` names the fields."""

    def __init__(self, code: grpc.StatusCode, message: str, violations: list[FieldViolation]) -> None:
        super().__init__(code, message)
        self.violations = violations


class Overloaded(MeshClientError):
    """The server is full; retry after ``retry_after_s``."""

    retryable = True

    def __init__(self, code: grpc.StatusCode, message: str, retry_after_s: float | None) -> None:
        super().__init__(code, message)
        self.retry_after_s = retry_after_s


class Unavailable(MeshClientError):
    """The server (or its engine) cannot be reached now."""

    retryable = True


class DeadlineExceeded(MeshClientError):
    """The call's deadline passed."""

    retryable = True


def from_rpc_error(err: grpc.RpcError) -> MeshClientError:
    """Translate a grpc error (with rich details, when present) into the client's hierarchy."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    status = None
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError):
        status = None
    violations: list[FieldViolation] = []
    retry_after: float | None = None
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            retry_after = info.retry_delay.ToNanoseconds() / 1e9
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(code, message, violations)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Overloaded(code, message, retry_after)
    if code == grpc.StatusCode.UNAVAILABLE:
        return Unavailable(code, message)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(code, message)
    return MeshClientError(code, message)
