import grpc
from google.rpc import error_details_pb2, status_pb2

from services.bootstrap.errors import (
    DependencyUnavailable,
    InvalidInput,
    MeshError,
    Overloaded,
    Violation,
    grpc_code_for,
    to_grpc_status,
)
from services.embedding.errors import EngineUnavailable, ModelFilesMissing


def _details(status: grpc.Status) -> status_pb2.Status:
    raw = dict(status.trailing_metadata)["grpc-status-details-bin"]
    return status_pb2.Status.FromString(raw)


def test_table_maps_each_family_to_one_code():
    assert grpc_code_for(InvalidInput("x")) == grpc.StatusCode.INVALID_ARGUMENT
    assert grpc_code_for(Overloaded("x", 1)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert grpc_code_for(DependencyUnavailable("x")) == grpc.StatusCode.UNAVAILABLE
    assert grpc_code_for(EngineUnavailable("x")) == grpc.StatusCode.UNAVAILABLE  # subclasses inherit
    assert grpc_code_for(ModelFilesMissing("x")) == grpc.StatusCode.FAILED_PRECONDITION
    assert grpc_code_for(MeshError("x")) == grpc.StatusCode.INTERNAL


def test_invalid_input_carries_field_violations():
    status = to_grpc_status(InvalidInput("bad", [Violation("texts[2]", "empty")]))
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    bad = error_details_pb2.BadRequest()
    assert _details(status).details[0].Unpack(bad)
    assert bad.field_violations[0].field == "texts[2]"


def test_overloaded_carries_retry_info():
    status = to_grpc_status(Overloaded("full", retry_after_s=0.25))
    info = error_details_pb2.RetryInfo()
    assert _details(status).details[0].Unpack(info)
    assert info.retry_delay.ToNanoseconds() == 250_000_000
