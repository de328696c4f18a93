"""gRPC method handlers built from a service descriptor: safe decoding and domain-error mapping.

The generated ``add_*Servicer_to_server`` helpers decode requests with ``FromString``; a request
that is not valid protobuf (invalid UTF-8 in a string field, say) then surfaces as INTERNAL. These
handlers decode themselves, so such a request is INVALID_ARGUMENT, and they translate every
:class:`MeshError` a servicer raises through the one table in :mod:`services.bootstrap.errors`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from services.bootstrap.errors import InvalidInput, MeshError, Violation, to_grpc_status
from services.bootstrap.telemetry import RpcTelemetry, rpc_kind

log = logging.getLogger(__name__)


class MalformedRequest:
    """Stands in for a request whose bytes could not be decoded."""

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason

    def error(self) -> InvalidInput:
        """The INVALID_ARGUMENT error this request earns."""
        return InvalidInput(
            f"request is not a valid {self.type_name}: {self.reason}",
            [Violation("request", "not decodable as protobuf (string fields must be valid UTF-8)")],
        )


def _decoder(cls: type[Message]) -> Callable[[bytes], Message | MalformedRequest]:
    def decode(raw: bytes) -> Message | MalformedRequest:
        try:
            return cls.FromString(raw)
        except DecodeError as exc:
            return MalformedRequest(cls.DESCRIPTOR.full_name, str(exc) or "decode error")

    return decode


async def _abort(context: grpc.aio.ServicerContext, error: MeshError) -> None:
    status = to_grpc_status(error)
    await context.abort(status.code, status.details, status.trailing_metadata)


async def _abort_internal(context: grpc.aio.ServicerContext, method: str, exc: Exception) -> None:
    log.error("unexpected error in %s", method, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}")


async def _checked_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Message]:
    async for item in requests:
        if isinstance(item, MalformedRequest):
            raise item.error()
        yield item


def _wrap(method: MethodDescriptor, behaviour: Callable[..., Any]) -> Any:
    """Wrap one servicer method according to its streaming shape."""
    name = method.full_name

    if not method.client_streaming and not method.server_streaming:
        async def unary_unary(request, context):
            try:
                if isinstance(request, MalformedRequest):
                    raise request.error()
                return await behaviour(request, context)
            except MeshError as err:
                await _abort(context, err)
            except (grpc.aio.AbortError, grpc.aio.UsageError):
                raise
            except Exception as exc:  # noqa: BLE001 - last line of defence, logged
                await _abort_internal(context, name, exc)
        return unary_unary

    async def streaming(request_or_iterator, context):
        try:
            if method.client_streaming:
                request_or_iterator = _checked_stream(request_or_iterator)
            elif isinstance(request_or_iterator, MalformedRequest):
                raise request_or_iterator.error()
            result = behaviour(request_or_iterator, context)
            if method.server_streaming:
                async for item in result:
                    yield item
            else:
                yield await result
        except MeshError as err:
            await _abort(context, err)
        except (grpc.aio.AbortError, grpc.aio.UsageError):
            raise
        except Exception as exc:  # noqa: BLE001
            await _abort_internal(context, name, exc)

    if method.client_streaming and not method.server_streaming:
        async def stream_unary(request_iterator, context):
            async for item in streaming(request_iterator, context):
                return item
        return stream_unary
    return streaming


def service_handler(descriptor: ServiceDescriptor, servicer: object,
                    telemetry: RpcTelemetry | None = None) -> grpc.GenericRpcHandler:
    """A generic handler for every RPC of ``descriptor``, implemented by ``servicer``'s methods.

    ``telemetry`` (span and metrics per call) wraps each method once, outside the error mapping, so
    it sees the final status code.
    """
    handlers = {}
    for method in descriptor.methods:
        behaviour = getattr(servicer, method.name)
        decode = _decoder(message_factory.GetMessageClass(method.input_type))
        encode = message_factory.GetMessageClass(method.output_type).SerializeToString
        wrapped = _wrap(method, behaviour)
        if telemetry is not None:
            wrapped = telemetry.wrap(f"/{descriptor.full_name}/{method.name}",
                                     rpc_kind(method.client_streaming, method.server_streaming), wrapped)
        if method.client_streaming and method.server_streaming:
            factory = grpc.stream_stream_rpc_method_handler
        elif method.client_streaming:
            factory = grpc.stream_unary_rpc_method_handler
        elif method.server_streaming:
            factory = grpc.unary_stream_rpc_method_handler
        else:
            factory = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = factory(wrapped, request_deserializer=decode, response_serializer=encode)
    return grpc.method_handlers_generic_handler(descriptor.full_name, handlers)
