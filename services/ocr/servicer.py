"""gRPC servicer: proto <-> :class:`Extractor` and :class:`JobStore`."""

from __future__ import annotations

import asyncio
import time

from mesh.ocr.v1 import ocr_pb2 as pb
from prometheus_client import Counter

from services.bootstrap.errors import InvalidInput, Violation
from services.ocr.extractor import ExtractOptions, Extractor, PageResult
from services.ocr.jobs import JobStore
from services.ocr.pii.detector import DEFAULT_THRESHOLD, MAX_TEXT_CHARS, Policy, detect, mask
from services.ocr.pii.recognizers import KINDS

PII_SPANS = Counter("mesh_ocr_pii_spans", "personal-data spans found (counts only: no text leaves the call)")

ENGINES = {"tesseract": pb.ENGINE_TESSERACT, "vlm": pb.ENGINE_VLM}
STATES = {"QUEUED": pb.JOB_STATE_QUEUED, "RUNNING": pb.JOB_STATE_RUNNING, "SUCCEEDED": pb.JOB_STATE_SUCCEEDED,
          "FAILED": pb.JOB_STATE_FAILED}


def options_from_proto(o: pb.Options) -> ExtractOptions:
    """Request options."""
    return ExtractOptions(languages=o.languages, fallback=not o.disable_fallback, deskew=not o.disable_deskew,
                          smooth=not o.disable_smoothing)


def page_to_proto(p: PageResult) -> pb.Page:
    """One page."""
    return pb.Page(
        index=p.index, text=p.text, mean_confidence=p.mean_confidence, engine=ENGINES[p.engine],
        fallback_reason=p.fallback_reason, fallback_error=p.fallback_error, skew_degrees=p.skew_degrees,
        ocr_width=p.ocr_size[0], ocr_height=p.ocr_size[1], timings=pb.PageTimings(**p.timings),
        lines=[pb.Line(text=ln.text, confidence=ln.confidence,
                       box=pb.Box(left=ln.box[0], top=ln.box[1], width=ln.box[2], height=ln.box[3]))
               for ln in p.lines])


def job_to_proto(job: dict) -> pb.Job:
    """A job's state."""
    return pb.Job(job_id=job["job_id"], state=STATES[job["state"]], pages_total=job["pages_total"],
                  pages_done=job["pages_done"], error=job["error"], created_unix_ms=job["created_unix_ms"],
                  updated_unix_ms=job["updated_unix_ms"], expires_unix_ms=job["expires_unix_ms"])


def pii_policy(request: pb.DetectPiiRequest) -> Policy:
    """The request's policy; every problem named at once (INVALID_ARGUMENT)."""
    bad: list[Violation] = []
    if not request.text.strip():
        bad.append(Violation("text", "empty or whitespace-only"))
    elif len(request.text) > MAX_TEXT_CHARS:
        bad.append(Violation("text", f"{len(request.text):,} characters; at most {MAX_TEXT_CHARS:,}"))
    unknown = sorted(set(request.kinds) - set(KINDS))
    if unknown:
        bad.append(Violation("kinds", f"unknown {unknown}; known: {list(KINDS)}"))
    threshold = request.threshold if request.HasField("threshold") else DEFAULT_THRESHOLD
    if not 0 <= threshold <= 1:
        bad.append(Violation("threshold", "must be between 0 and 1"))
    if bad:
        raise InvalidInput("invalid personal-data request", bad)
    return Policy(kinds=tuple(request.kinds) or KINDS, threshold=threshold, company_lines=request.company_lines,
                  keep=request.keep)


def joined(pages: list[PageResult]) -> str:
    """All pages' text separated by blank lines."""
    return "\n\n".join(p.text for p in pages)


class OcrServicer:
    """Implements mesh.ocr.v1.OcrService."""

    def __init__(self, extractor: Extractor, jobs: JobStore, max_sync_pages: int) -> None:
        self.extractor = extractor
        self.jobs = jobs
        self.max_sync_pages = max_sync_pages

    async def Extract(self, request, context):  # noqa: N802
        """Read one image or a short PDF now."""
        pages = await self.extractor.extract(request.content, options_from_proto(request.options),
                                             self.max_sync_pages)
        return pb.ExtractResponse(pages=[page_to_proto(p) for p in pages], text=joined(pages))

    async def SubmitJob(self, request, context):  # noqa: N802
        """Queue a multi-page job."""
        job = await self.jobs.submit(list(request.contents), options_from_proto(request.options))
        return pb.SubmitJobResponse(job=job_to_proto(job))

    async def GetJob(self, request, context):  # noqa: N802
        """A job's state."""
        return pb.GetJobResponse(job=job_to_proto(await self.jobs.status(request.job_id)))

    async def DetectPii(self, request, context):  # noqa: N802
        """Personal data in a text, masked on request (nothing of the text is logged or traced)."""
        policy = pii_policy(request)
        t = time.perf_counter()
        spans = await asyncio.to_thread(detect, request.text, policy)
        masked = mask(request.text, spans, request.keep) if request.mask else ""
        PII_SPANS.inc(len(spans))
        return pb.DetectPiiResponse(
            spans=[pb.PiiSpan(kind=s.kind, start=s.start, end=s.end, score=s.score, rule=s.rule,
                              text=request.text[s.start:s.end]) for s in spans],
            masked_text=masked, detect_ns=int((time.perf_counter() - t) * 1e9))

    async def GetJobResult(self, request, context):  # noqa: N802
        """A finished job's pages."""
        job, pages = await self.jobs.result(request.job_id)
        return pb.GetJobResultResponse(job=job_to_proto(job), pages=[page_to_proto(p) for p in pages],
                                       text=joined(pages))
