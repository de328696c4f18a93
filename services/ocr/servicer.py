"""gRPC servicer: proto <-> :class:`Extractor` and :class:`JobStore`."""

from __future__ import annotations

import asyncio
import time

from mesh.ocr.v1 import ocr_pb2 as pb
from prometheus_client import Counter

from services.bootstrap.errors import InvalidInput, Violation
from services.ocr.extractor import ExtractOptions, Extractor, PageResult
from services.ocr.filereader import FileReader
from services.ocr.jobs import JobStore
from services.ocr.pii.detector import DEFAULT_THRESHOLD, MAX_TEXT_CHARS, Policy, detect, mask
from services.ocr.pii.recognizers import KINDS

PII_SPANS = Counter("mesh_ocr_pii_spans", "personal-data spans found (counts only: no text leaves the call)")

ENGINES = {"tesseract": pb.ENGINE_TESSERACT, "vlm": pb.ENGINE_VLM, "text_layer": pb.ENGINE_TEXT_LAYER}
STATES = {"QUEUED": pb.JOB_STATE_QUEUED, "RUNNING": pb.JOB_STATE_RUNNING, "SUCCEEDED": pb.JOB_STATE_SUCCEEDED,
          "FAILED": pb.JOB_STATE_FAILED}


def options_from_proto(o: pb.Options) -> ExtractOptions:
    """Request options."""
    return ExtractOptions(languages=o.languages, fallback=not o.disable_fallback, deskew=not o.disable_deskew,
                          smooth=not o.disable_smoothing)


def box_to_proto(box: tuple[int, int, int, int] | list[int] | None) -> pb.Box | None:
    """A (left, top, width, height) box; None stays unset."""
    return None if box is None else pb.Box(left=box[0], top=box[1], width=box[2], height=box[3])


def page_to_proto(p: PageResult) -> pb.Page:
    """One page."""
    return pb.Page(
        index=p.index, text=p.text, mean_confidence=p.mean_confidence, engine=ENGINES[p.engine],
        fallback_reason=p.fallback_reason, fallback_error=p.fallback_error, skew_degrees=p.skew_degrees,
        ocr_width=p.ocr_size[0], ocr_height=p.ocr_size[1], timings=pb.PageTimings(**p.timings),
        image_width=p.image_size[0], image_height=p.image_size[1], cached=p.cached,
        lines=[pb.Line(text=ln.text, confidence=ln.confidence, box=box_to_proto(ln.box),
                       image_box=box_to_proto(ln.image_box),
                       words=[pb.Word(text=w.text, confidence=w.confidence, box=box_to_proto(w.box)) for w in ln.words])
               for ln in p.lines])


def masked_page_to_proto(page: dict) -> pb.MaskedPage:
    """One page of a masking job's result (services.ocr.jobs.masked_view)."""
    return pb.MaskedPage(
        index=page["index"], image_width=page["image_size"][0], image_height=page["image_size"][1],
        has_png=page["has_png"], cached=page["cached"], mean_confidence=page["mean_confidence"],
        fallback_reason=page["fallback_reason"], total_ns=page["total_ns"],
        entities=[_masked_entity(e) for e in page["entities"]],
        pictures=[_masked_entity(e) for e in page.get("pictures", [])])


def _masked_entity(e: dict) -> pb.MaskedEntity:
    return pb.MaskedEntity(kind=e["kind"], score=e["score"], rule=e["rule"], text=e["text"],
                           box=box_to_proto(e["box"]), masked=[box_to_proto(b) for b in e["masked"]])


def job_to_proto(job: dict) -> pb.Job:
    """A job's state."""
    return pb.Job(job_id=job["job_id"], state=STATES[job["state"]], pages_total=job["pages_total"],
                  pages_done=job["pages_done"], error=job["error"], created_unix_ms=job["created_unix_ms"],
                  updated_unix_ms=job["updated_unix_ms"], expires_unix_ms=job["expires_unix_ms"])


def _policy_violations(kinds, threshold: float, prefix: str = "") -> list[Violation]:
    bad: list[Violation] = []
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        bad.append(Violation(f"{prefix}kinds", f"unknown {unknown}; known: {list(KINDS)}"))
    if not 0 <= threshold <= 1:
        bad.append(Violation(f"{prefix}threshold", "must be between 0 and 1"))
    return bad


def pii_policy(request: pb.DetectPiiRequest) -> Policy:
    """The request's policy; every problem named at once (INVALID_ARGUMENT)."""
    bad: list[Violation] = []
    if not request.text.strip():
        bad.append(Violation("text", "empty or whitespace-only"))
    elif len(request.text) > MAX_TEXT_CHARS:
        bad.append(Violation("text", f"{len(request.text):,} characters; at most {MAX_TEXT_CHARS:,}"))
    threshold = request.threshold if request.HasField("threshold") else DEFAULT_THRESHOLD
    bad += _policy_violations(request.kinds, threshold)
    if bad:
        raise InvalidInput("invalid personal-data request", bad)
    return Policy(kinds=tuple(request.kinds) or KINDS, threshold=threshold, company_lines=request.company_lines,
                  keep=request.keep)


def masking_policy(m: pb.MaskingOptions) -> dict:
    """A masking job's policy as stored with the job (INVALID_ARGUMENT naming each bad field)."""
    threshold = m.threshold if m.HasField("threshold") else DEFAULT_THRESHOLD
    bad = _policy_violations(m.kinds, threshold, "masking.")
    if bad:
        raise InvalidInput("invalid masking options", bad)
    return {"kinds": list(m.kinds), "threshold": threshold, "keep": m.keep, "company_lines": m.company_lines,
            "masked_png": m.masked_png, "pictures": not m.skip_pictures}


def joined(pages: list[PageResult]) -> str:
    """All pages' text separated by blank lines."""
    return "\n\n".join(p.text for p in pages)


class OcrServicer:
    """Implements mesh.ocr.v1.OcrService."""

    def __init__(self, extractor: Extractor, jobs: JobStore, max_sync_pages: int,
                 files: FileReader | None = None) -> None:
        self.extractor = extractor
        self.jobs = jobs
        self.max_sync_pages = max_sync_pages
        self.files = files or FileReader(extractor, 1000, max_sync_pages)

    async def ReadFile(self, request, context):  # noqa: N802
        """Read one file of any known type: text layers where usable, OCR where not."""
        kind, pages, problems = await self.files.read(request.content, options_from_proto(request.options))
        return await asyncio.to_thread(lambda: pb.ReadFileResponse(  # up to millions of boxed characters
            kind=kind, pages=[page_to_proto(p) for p in pages], text=joined(pages), layer_problems=problems))

    async def Extract(self, request, context):  # noqa: N802
        """Read one image or a short PDF now (from the OCR cache when it holds the same upload)."""
        options = options_from_proto(request.options)
        cache = self.jobs.cache
        key = cache.key(request.content, options, self.max_sync_pages) if cache is not None and request.content else ""
        pages = await cache.get(key) if cache is not None and key else None
        if pages is None:
            pages = await self.extractor.extract(request.content, options, self.max_sync_pages)
            if cache is not None and key:
                await cache.put(key, pages)
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

    async def SubmitMaskingJob(self, request, context):  # noqa: N802
        """Queue a masking job (its policy checked first)."""
        masking = masking_policy(request.masking)
        job = await self.jobs.submit(list(request.contents), options_from_proto(request.options), masking)
        return pb.SubmitMaskingJobResponse(job=job_to_proto(job))

    async def GetMaskingResult(self, request, context):  # noqa: N802
        """A finished masking job's findings per page."""
        job, pages = await self.jobs.masking_result(request.job_id)
        return pb.GetMaskingResultResponse(job=job_to_proto(job), pages=[masked_page_to_proto(p) for p in pages])

    async def GetMaskedPage(self, request, context):  # noqa: N802
        """One masked page as PNG."""
        return pb.GetMaskedPageResponse(png=await self.jobs.masked_page(request.job_id, request.index))

    async def GetJobResult(self, request, context):  # noqa: N802
        """A finished job's pages."""
        job, pages = await self.jobs.result(request.job_id)
        return await asyncio.to_thread(lambda: pb.GetJobResultResponse(
            job=job_to_proto(job), pages=[page_to_proto(p) for p in pages], text=joined(pages)))
