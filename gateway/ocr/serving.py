"""OCR jobs over the OCR client: decode uploads, submit, read state and results (no HTTP here)."""

from __future__ import annotations

import base64
import binascii
import re

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient, Job, MaskedPage, Masking, Options, Page
from gateway.access.context import owner, owns
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, from_client_error
from gateway.ocr import protocol as api
from gateway.tasks.store import KeyValue, MemoryKeyValue, StoreUnavailable

JOB_ID = re.compile(r"[0-9a-f]{32}")
MAX_EXTRACT_BYTES = 10_000_000  # one upload read synchronously; larger documents are jobs


def lines_view(p: Page) -> list[api.OcrLine]:
    """The REST view of a page's lines and words."""
    return [api.OcrLine(text=ln.text, confidence=round(ln.confidence, 2), box=list(ln.box),
                        image_box=list(ln.image_box) if ln.image_box else None,
                        words=[api.OcrWord(text=w.text, confidence=round(w.confidence, 2), box=list(w.box))
                               for w in ln.words])
            for ln in p.lines]


def page_view(p: Page) -> api.OcrPage:
    """The REST view of one page's reading."""
    return api.OcrPage(
        index=p.index, text=p.text, engine=p.engine, mean_confidence=round(p.mean_confidence, 2),  # type: ignore[arg-type]
        fallback_reason=p.fallback_reason, fallback_error=p.fallback_error,
        skew_degrees=round(p.skew_degrees, 2), ms=round(p.ms, 2), image_width=p.image_size[0],
        image_height=p.image_size[1], cached=p.cached, lines=lines_view(p))


def _state(job: Job) -> dict:
    """The fields every job view shares (api.JobState)."""
    return {"id": job.id, "state": job.state, "pages_total": job.pages_total, "pages_done": job.pages_done,
            "error": job.error, "created_unix_ms": job.created_unix_ms, "updated_unix_ms": job.updated_unix_ms,
            "expires_unix_ms": job.expires_unix_ms}


def job_view(job: Job, result: tuple[str, list[Page]] | None = None) -> api.OcrJob:
    """The REST view of a job (and its result once it succeeded)."""
    out = api.OcrJob(**_state(job))
    if result is not None:
        text, pages = result
        out.result = api.OcrResult(text=text, pages=[page_view(p) for p in pages])
    return out


def masking_view(job: Job, pages: list[MaskedPage] | None = None) -> api.MaskingJob:
    """The REST view of a masking job (and its findings once it succeeded)."""
    out = api.MaskingJob(**_state(job))
    if pages is not None:
        out.result = api.MaskingResult(pages=[api.MaskedPage(
            index=p.index, image_width=p.image_size[0], image_height=p.image_size[1], cached=p.cached,
            mean_confidence=round(p.mean_confidence, 2), fallback_reason=p.fallback_reason, ms=round(p.ms, 2),
            png_url=f"/v1/masking/jobs/{job.id}/pages/{p.index}.png" if p.has_png else None,
            entities=[api.MaskedEntity(kind=e.kind, score=round(e.score, 3), rule=e.rule, text=e.text,  # type: ignore[arg-type]
                                       box=list(e.box), masked=[list(b) for b in e.masked]) for e in p.entities],
            pictures=[api.MaskedPicture(kind=e.kind, score=round(e.score, 3), box=list(e.box))  # type: ignore[arg-type]
                      for e in p.pictures])
            for p in pages])
    return out


def _decode(documents: list[api.OcrDocument]) -> list[bytes]:
    contents = []
    for i, doc in enumerate(documents):
        try:
            contents.append(base64.b64decode(doc.content_base64, validate=True))
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_argument", "a document is not valid base64", fields=[
                FieldError(field=f"documents[{i}].content_base64", description="standard base64")]) from None
    return contents


def _uploads_named(err: MeshClientError, name: str = "documents") -> ApiError:
    api_err = from_client_error(err)
    for f in api_err.body.error.fields:  # the service names uploads contents[i]; REST says documents[i]
        f.field = f.field.replace("contents[", f"{name}[").replace("content", name).replace("masking.", "")
    return api_err


class Ocr:
    """Submit and poll OCR jobs (their state lives in Redis behind the OCR service).

    Each job's owner (the submitting key's id) is recorded in the gateway's sessions store, ``owner:ocr:<id>``,
    for as long as the service keeps jobs: another key polls it as a job that does not exist.
    """

    def __init__(self, client: AsyncOcrClient, owners: KeyValue | None = None, ttl_s: int = 7 * 86400) -> None:
        self.client = client
        self.owners = owners if owners is not None else MemoryKeyValue()
        self.ttl_s = ttl_s

    async def _record(self, job_id: str) -> None:
        try:
            await self.owners.set(f"owner:ocr:{job_id}", owner(), self.ttl_s)
        except StoreUnavailable as err:
            raise ApiError(503, "unavailable", f"the job was queued but its owner not recorded ({err}); submit "
                           "again", retryable=True) from None

    async def _mine(self, job_id: str) -> None:
        """404 for an id the gateway did not make or a job another key submitted."""
        if not JOB_ID.fullmatch(job_id):  # ids are ours (uuid4 hex): anything else never reaches the service
            raise ApiError(404, "not_found", "no such job (job ids are 32 hexadecimal characters)")
        try:
            recorded = await self.owners.get(f"owner:ocr:{job_id}")
        except StoreUnavailable as err:
            raise ApiError(503, "unavailable", str(err), retryable=True) from None
        if not owns(recorded):
            raise ApiError(404, "not_found", f"no such job {job_id!r} (or it expired)")

    async def submit(self, body: api.OcrJobRequest, deadline: Deadline) -> api.OcrJob:
        """Decode the uploads (400 naming the bad one), then queue the job."""
        contents = _decode(body.documents)
        options = Options(languages=body.languages or "", fallback=body.vlm_fallback, deskew=body.deskew)
        try:
            out = job_view(await self.client.submit_job(contents, options, timeout_s=deadline.check()))
        except MeshClientError as err:
            raise _uploads_named(err) from None
        await self._record(out.id)
        return out

    async def extract(self, body: api.OcrExtractRequest, deadline: Deadline) -> api.OcrResult:
        """Read one image or a short PDF now (400 naming the upload when it cannot be read)."""
        try:
            content = base64.b64decode(body.content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_argument", "content_base64 is not valid base64", fields=[
                FieldError(field="content_base64", description="standard base64")]) from None
        if len(content) > MAX_EXTRACT_BYTES:
            raise ApiError(413, "payload_too_large", f"{len(content):,} bytes; /v1/ocr:extract reads at most "
                           f"{MAX_EXTRACT_BYTES:,} (a larger document is a job: /v1/ocr/jobs)")
        options = Options(languages=body.languages or "", fallback=body.vlm_fallback, deskew=body.deskew)
        try:
            text, pages = await self.client.extract(content, options, timeout_s=deadline.check())
        except MeshClientError as err:
            raise _uploads_named(err, "content_base64") from None
        return api.OcrResult(text=text, pages=[page_view(p) for p in pages])

    async def submit_masking(self, body: api.MaskingJobRequest, deadline: Deadline) -> api.MaskingJob:
        """Decode the uploads, then queue a masking job."""
        contents = _decode(body.documents)
        masking = Masking(kinds=tuple(body.kinds or ()), keep=body.keep, company_lines=body.company_lines,
                          threshold=body.threshold, masked_png=body.masked_png, pictures=body.pictures)
        options = Options(languages=body.languages or "", fallback=False, deskew=body.deskew)
        try:
            out = masking_view(await self.client.submit_masking_job(contents, masking, options,
                                                                    timeout_s=deadline.check()))
        except MeshClientError as err:
            raise _uploads_named(err) from None
        await self._record(out.id)
        return out

    async def masking_job(self, job_id: str, deadline: Deadline) -> api.MaskingJob:
        """A masking job's state, with its findings once it succeeded."""
        await self._mine(job_id)
        try:
            job = await self.client.get_job(job_id, timeout_s=deadline.check())
            pages = await self.client.get_masking_result(job_id, timeout_s=deadline.check()) \
                if job.state == "succeeded" else None
        except MeshClientError as err:
            raise from_client_error(err) from None
        return masking_view(job, pages)

    async def masked_png(self, job_id: str, index: int, deadline: Deadline) -> bytes:
        """One masked page as PNG."""
        await self._mine(job_id)
        try:
            return await self.client.get_masked_page(job_id, index, timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None

    async def job(self, job_id: str, deadline: Deadline) -> api.OcrJob:
        """A job's state, with its result once it succeeded."""
        await self._mine(job_id)
        job = await self.client.get_job(job_id, timeout_s=deadline.check())
        done = job.state == "succeeded"
        return job_view(job, await self.client.get_job_result(job_id, timeout_s=deadline.check()) if done else None)

    async def detect_pii(self, body: api.PiiDetectRequest, deadline: Deadline) -> api.PiiDetectResponse:
        """Personal data in a text (the OCR service's detector); nothing of the text is logged here."""
        try:
            out = await self.client.detect_pii(body.text, kinds=body.kinds or (), mask=body.mask, keep=body.keep,
                                               company_lines=body.company_lines, threshold=body.threshold,
                                               timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None
        return api.PiiDetectResponse(
            spans=[api.PiiSpan(kind=s.kind, start=s.start, end=s.end, score=round(s.score, 3), rule=s.rule,  # type: ignore[arg-type]
                               text=s.text) for s in out.spans],
            masked_text=out.masked_text if body.mask else None, detect_ms=round(out.detect_ns / 1e6, 3))
