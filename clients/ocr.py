"""Async client of mesh.ocr.v1.OcrService: domain types out, every call with a deadline.

The enum maps between the contract's names (``queued``, ``tesseract`` …) and the proto live here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import grpc
from mesh.ocr.v1 import ocr_pb2 as pb
from mesh.ocr.v1 import ocr_pb2_grpc as pb_grpc

from clients.channels import aio_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck
from clients.retry import retry_options

# Reads are retried; SubmitJob is not (a retry could queue the job twice).
_RETRY = retry_options("mesh.ocr.v1.OcrService", ["Extract", "GetJob", "GetJobResult", "GetMaskingResult",
                                                  "GetMaskedPage", "ReadFile"])
_MAX_MESSAGE = 128 * 1024 * 1024

DEFAULT_TIMEOUT_S = 30.0
JobState = Literal["queued", "running", "succeeded", "failed"]
EngineName = Literal["tesseract", "vlm", "text_layer"]
STATES: dict[int, JobState] = {pb.JOB_STATE_QUEUED: "queued", pb.JOB_STATE_RUNNING: "running",
                               pb.JOB_STATE_SUCCEEDED: "succeeded", pb.JOB_STATE_FAILED: "failed"}
ENGINES: dict[int, EngineName] = {pb.ENGINE_TESSERACT: "tesseract", pb.ENGINE_VLM: "vlm",
                                  pb.ENGINE_TEXT_LAYER: "text_layer"}


@dataclass(frozen=True)
class Options:
    """How to read one request's images (every field optional)."""

    languages: str = ""  # Tesseract languages joined by '+' (empty: the service's setting)
    fallback: bool = True  # the VLM may read a page Tesseract fails on (when the service has one)
    deskew: bool = True

    def to_proto(self) -> pb.Options:
        """The contract's message."""
        return pb.Options(languages=self.languages, disable_fallback=not self.fallback, disable_deskew=not self.deskew)


Box = tuple[int, int, int, int]  # left, top, width, height


@dataclass(frozen=True)
class Word:
    """A recognised word; ``box`` is in the uploaded image's pixels (after EXIF orientation)."""

    text: str
    confidence: float
    box: Box


@dataclass(frozen=True)
class Line:
    """A recognised line; ``box`` is in the page's OCR pixel space, ``image_box`` in the uploaded image."""

    text: str
    confidence: float
    box: Box
    words: tuple[Word, ...] = ()
    image_box: Box | None = None


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
    image_size: tuple[int, int] = (0, 0)  # the uploaded image's size: words' boxes are in it
    cached: bool = False  # the reading came from the OCR cache


@dataclass(frozen=True)
class FileRead:
    """A file as ReadFile read it: its type from the bytes, its text, its pages, why a page's layer was unused."""

    kind: str
    text: str
    pages: list[Page]
    layer_problems: dict[int, str]


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


def _box(b: pb.Box) -> Box:
    return b.left, b.top, b.width, b.height


def page_from_proto(p: pb.Page) -> Page:
    """A proto page as the domain type."""
    return Page(index=p.index, text=p.text, engine=ENGINES.get(p.engine, "tesseract"),
                mean_confidence=p.mean_confidence, fallback_reason=p.fallback_reason,
                fallback_error=p.fallback_error, skew_degrees=p.skew_degrees, ms=p.timings.total_ns / 1e6,
                image_size=(p.image_width, p.image_height), cached=p.cached,
                lines=[Line(ln.text, ln.confidence, _box(ln.box),
                            tuple(Word(w.text, w.confidence, _box(w.box)) for w in ln.words),
                            _box(ln.image_box) if ln.HasField("image_box") else None)
                       for ln in p.lines])


@dataclass(frozen=True)
class MaskedEntity:
    """Personal data found on a page image: ``box`` around it, ``masked`` what is blacked out."""

    kind: str
    score: float
    rule: str
    text: str
    box: Box
    masked: tuple[Box, ...]


@dataclass(frozen=True)
class MaskedPage:
    """What a masking job found on one page."""

    index: int
    image_size: tuple[int, int]
    entities: list[MaskedEntity]
    has_png: bool
    cached: bool
    mean_confidence: float
    fallback_reason: str
    ms: float
    pictures: list[MaskedEntity] = field(default_factory=list)  # photographs, each masked whole


@dataclass(frozen=True)
class Masking:
    """What a masking job finds and returns (see mesh.ocr.v1.MaskingOptions)."""

    kinds: tuple[str, ...] = ()
    keep: bool = False
    company_lines: bool = False
    threshold: float | None = None
    masked_png: bool = False
    pictures: bool = True  # find and mask photographs too

    def to_proto(self) -> pb.MaskingOptions:
        """The contract's message."""
        out = pb.MaskingOptions(kinds=list(self.kinds), keep=self.keep, company_lines=self.company_lines,
                                masked_png=self.masked_png, skip_pictures=not self.pictures)
        if self.threshold is not None:
            out.threshold = self.threshold
        return out


def masked_page_from_proto(p: pb.MaskedPage) -> MaskedPage:
    """A proto masked page as the domain type."""
    return MaskedPage(index=p.index, image_size=(p.image_width, p.image_height), has_png=p.has_png, cached=p.cached,
                      mean_confidence=p.mean_confidence, fallback_reason=p.fallback_reason, ms=p.total_ns / 1e6,
                      entities=[MaskedEntity(e.kind, e.score, e.rule, e.text, _box(e.box),
                                             tuple(_box(b) for b in e.masked)) for e in p.entities],
                      pictures=[MaskedEntity(e.kind, e.score, e.rule, e.text, _box(e.box),
                                             tuple(_box(b) for b in e.masked)) for e in p.pictures])


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

    async def read_file(self, content: bytes, options: Options | None = None,
                        timeout_s: float | None = None) -> FileRead:
        """Read one file of any known type (PDF text layers, DOCX, HTML, text, images; OCR where needed)."""
        request = pb.ReadFileRequest(content=content, options=(options or Options()).to_proto())
        resp = await self._call(self._stub.ReadFile, request, timeout_s)
        # A file's pages can hold millions of characters and their word boxes: built off the event loop.
        return await asyncio.to_thread(
            lambda: FileRead(resp.kind, resp.text, [page_from_proto(p) for p in resp.pages], dict(resp.layer_problems)))

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
        return resp.text, await asyncio.to_thread(lambda: [page_from_proto(p) for p in resp.pages])

    async def submit_masking_job(self, contents: list[bytes], masking: Masking, options: Options | None = None,
                                 timeout_s: float | None = None) -> Job:
        """Queue a masking job (its state is read with :meth:`get_job`)."""
        request = pb.SubmitMaskingJobRequest(contents=contents, options=(options or Options()).to_proto(),
                                             masking=masking.to_proto())
        return job_from_proto((await self._call(self._stub.SubmitMaskingJob, request, timeout_s)).job)

    async def get_masking_result(self, job_id: str, timeout_s: float | None = None) -> list[MaskedPage]:
        """A finished masking job's pages in order."""
        resp = await self._call(self._stub.GetMaskingResult, pb.GetMaskingResultRequest(job_id=job_id), timeout_s)
        return [masked_page_from_proto(p) for p in resp.pages]

    async def get_masked_page(self, job_id: str, index: int, timeout_s: float | None = None) -> bytes:
        """One masked page of a finished masking job, as PNG."""
        resp = await self._call(self._stub.GetMaskedPage, pb.GetMaskedPageRequest(job_id=job_id, index=index),
                                timeout_s)
        return resp.png

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
