"""Async client of mesh.ocr.v1.OcrService; every call carries a deadline."""

from __future__ import annotations

import grpc
from mesh.ocr.v1 import ocr_pb2 as pb
from mesh.ocr.v1 import ocr_pb2_grpc as pb_grpc

from clients.channels import aio_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck
from clients.retry import retry_options

# Reads are retried; SubmitJob is not (a retry could queue the job twice).
_RETRY = retry_options("mesh.ocr.v1.OcrService", ["Extract", "GetJob", "GetJobResult"])
_MAX_MESSAGE = 128 * 1024 * 1024

DEFAULT_TIMEOUT_S = 30.0


class AsyncOcrClient(HealthCheck):
    """grpc.aio client; methods take and return the service's proto messages."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.timeout_s = timeout_s
        self._channel = channel or aio_channel(target, options=[
            *_RETRY, ("grpc.max_send_message_length", _MAX_MESSAGE),
            ("grpc.max_receive_message_length", _MAX_MESSAGE)])
        self._stub = pb_grpc.OcrServiceStub(self._channel)

    async def _call(self, method, request, timeout_s: float | None):
        try:
            return await method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def extract(self, content: bytes, options: pb.Options | None = None,
                      timeout_s: float | None = None) -> pb.ExtractResponse:
        """Read one image or a short PDF."""
        return await self._call(self._stub.Extract, pb.ExtractRequest(content=content, options=options), timeout_s)

    async def submit_job(self, contents: list[bytes], options: pb.Options | None = None,
                         timeout_s: float | None = None) -> pb.Job:
        """Queue a multi-page job."""
        resp = await self._call(self._stub.SubmitJob, pb.SubmitJobRequest(contents=contents, options=options),
                                timeout_s)
        return resp.job

    async def get_job(self, job_id: str, timeout_s: float | None = None) -> pb.Job:
        """A job's state."""
        return (await self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), timeout_s)).job

    async def get_job_result(self, job_id: str, timeout_s: float | None = None) -> pb.GetJobResultResponse:
        """A finished job's pages."""
        return await self._call(self._stub.GetJobResult, pb.GetJobResultRequest(job_id=job_id), timeout_s)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()
