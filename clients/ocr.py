"""Async client of mesh.ocr.v1.OcrService: domain types out, every call with a deadline.

The enum maps between the contract's names (``queued``, ``tesseract`` …) and the proto live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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
JobState = Literal["queued", "running", "succeeded", "failed"]
EngineName = Literal["tesseract", "vlm"]
STATES: dict[int, JobState] = {pb.JOB_STATE_QUEUED: "queued", pb.JOB_STATE_RUNNING: "running",
                               pb.JOB_STATE_SUCCEEDED: "succeeded", pb.JOB_STATE_FAILED: "failed"}
ENGINES: dict[int, EngineName] = {pb.ENGINE_TESSERACT: "tesseract", pb.ENGINE_VLM: "vlm"}


@dataclass(frozen=True)
class Options:
    """How to read one request's images (every field optional)."""

    languages: str = ""  # Tesseract languages joined by '+' (empty: the service's setting)
    fallback: bool = True  # the VLM may read a page Tesseract fails on (when the service has one)
    deskew: bool = True

    def to_proto(self) -> pb.Options:
        """The contract's message."""
        return pb.Options(languages=self.languages, disable_fallback=not self.fallback, disable_deskew=not self.deskew)


@dataclass(frozen=True)
class Line:
    """A recognised line; ``box`` is (left, top, width, height) in the page's OCR pixel space."""

    text: str
    confidence: float
    box: tuple[int, int, int, int]


@dataclass(frozen=True)
class Page:
    """What was read from one page."""

    index: int
    text: str
    engine: EngineName
    mean_confidence: float
    fallback_reason: str
    fallback_error: str
    skew_degrees: float
    lines: list[Line]
    ms: float


@dataclass(frozen=True)
class Job:
    """A multi-page job's state."""

    id: str
    state: JobState
    pages_total: int
    pages_done: int
    error: str
    created_unix_ms: int
    updated_unix_ms: int
    expires_unix_ms: int


def job_from_proto(j: pb.Job) -> Job:
    """A proto job as the domain type."""
    return Job(id=j.job_id, state=STATES.get(j.state, "queued"), pages_total=j.pages_total, pages_done=j.pages_done,
               error=j.error, created_unix_ms=j.created_unix_ms, updated_unix_ms=j.updated_unix_ms,
               expires_unix_ms=j.expires_unix_ms)


def page_from_proto(p: pb.Page) -> Page:
    """A proto page as the domain type."""
    return Page(index=p.index, text=p.text, engine=ENGINES.get(p.engine, "tesseract"),
                mean_confidence=p.mean_confidence, fallback_reason=p.fallback_reason,
                fallback_error=p.fallback_error, skew_degrees=p.skew_degrees, ms=p.timings.total_ns / 1e6,
                lines=[Line(ln.text, ln.confidence, (ln.box.left, ln.box.top, ln.box.width, ln.box.height))
                       for ln in p.lines])


@dataclass(frozen=True)
class PiiSpan:
    """One finding of personal data: ``text[start:end]`` is of ``kind`` (offsets in code points)."""

    kind: str
    start: int
    end: int
    score: float
    rule: str
    text: str


@dataclass(frozen=True)
class PiiResult:
    """What :meth:`AsyncOcrClient.detect_pii` found, the masked text when asked, and the service's time."""

    spans: list[PiiSpan]
    masked_text: str
    detect_ns: int


class AsyncOcrClient(HealthCheck):
    """grpc.aio client; methods take and return domain types (the protos stay in this module)."""

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

    async def extract(self, content: bytes, options: Options | None = None,
                      timeout_s: float | None = None) -> tuple[str, list[Page]]:
        """Read one image or a short PDF: (the text, its pages)."""
        request = pb.ExtractRequest(content=content, options=(options or Options()).to_proto())
        resp = await self._call(self._stub.Extract, request, timeout_s)
        return resp.text, [page_from_proto(p) for p in resp.pages]

    async def submit_job(self, contents: list[bytes], options: Options | None = None,
                         timeout_s: float | None = None) -> Job:
        """Queue a multi-page job."""
        request = pb.SubmitJobRequest(contents=contents, options=(options or Options()).to_proto())
        resp = await self._call(self._stub.SubmitJob, request, timeout_s)
        return job_from_proto(resp.job)

    async def get_job(self, job_id: str, timeout_s: float | None = None) -> Job:
        """A job's state."""
        return job_from_proto((await self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), timeout_s)).job)

    async def get_job_result(self, job_id: str, timeout_s: float | None = None) -> tuple[str, list[Page]]:
        """A finished job's (text, pages in order)."""
        resp = await self._call(self._stub.GetJobResult, pb.GetJobResultRequest(job_id=job_id), timeout_s)
        return resp.text, [page_from_proto(p) for p in resp.pages]

    async def detect_pii(self, text: str, *, kinds: Sequence[str] = (), mask: bool = False, keep: bool = False,
                         company_lines: bool = False, threshold: float | None = None,
                         timeout_s: float | None = None) -> PiiResult:
        """Personal data in ``text`` (every kind unless ``kinds``); ``mask`` adds the masked text."""
        request = pb.DetectPiiRequest(text=text, kinds=list(kinds), mask=mask, keep=keep, company_lines=company_lines)
        if threshold is not None:
            request.threshold = threshold
        resp = await self._call(self._stub.DetectPii, request, timeout_s)
        return PiiResult([PiiSpan(s.kind, s.start, s.end, s.score, s.rule, s.text) for s in resp.spans],
                         resp.masked_text, resp.detect_ns)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()
