"""OCR jobs over the OCR client: decode uploads, submit, read state and results (no HTTP here)."""

from __future__ import annotations

import base64
import binascii
import re

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient, Job, Options, Page
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, from_client_error
from gateway.ocr import protocol as api

JOB_ID = re.compile(r"[0-9a-f]{32}")


def job_view(job: Job, result: tuple[str, list[Page]] | None = None) -> api.OcrJob:
    """The REST view of a job (and its result once it succeeded)."""
    out = api.OcrJob(id=job.id, state=job.state, pages_total=job.pages_total, pages_done=job.pages_done,
                     error=job.error, created_unix_ms=job.created_unix_ms, updated_unix_ms=job.updated_unix_ms,
                     expires_unix_ms=job.expires_unix_ms)
    if result is not None:
        text, pages = result
        out.result = api.OcrResult(text=text, pages=[api.OcrPage(
            index=p.index, text=p.text, engine=p.engine, mean_confidence=round(p.mean_confidence, 2),
            fallback_reason=p.fallback_reason, fallback_error=p.fallback_error,
            skew_degrees=round(p.skew_degrees, 2), ms=round(p.ms, 2),
            lines=[api.OcrLine(text=ln.text, confidence=round(ln.confidence, 2), box=list(ln.box)) for ln in p.lines])
            for p in pages])
    return out


class Ocr:
    """Submit and poll OCR jobs (their state lives in Redis behind the OCR service)."""

    def __init__(self, client: AsyncOcrClient) -> None:
        self.client = client

    async def submit(self, body: api.OcrJobRequest, deadline: Deadline) -> api.OcrJob:
        """Decode the uploads (400 naming the bad one), then queue the job."""
        contents = []
        for i, doc in enumerate(body.documents):
            try:
                contents.append(base64.b64decode(doc.content_base64, validate=True))
            except (binascii.Error, ValueError):
                raise ApiError(400, "invalid_argument", "a document is not valid base64", fields=[
                    FieldError(field=f"documents[{i}].content_base64", description="standard base64")]) from None
        options = Options(languages=body.languages or "", fallback=body.vlm_fallback, deskew=body.deskew)
        try:
            return job_view(await self.client.submit_job(contents, options, timeout_s=deadline.check()))
        except MeshClientError as err:
            api_err = from_client_error(err)
            for f in api_err.body.error.fields:  # the service names uploads contents[i]; REST says documents[i]
                f.field = f.field.replace("contents[", "documents[")
            raise api_err from None

    async def job(self, job_id: str, deadline: Deadline) -> api.OcrJob:
        """A job's state, with its result once it succeeded."""
        if not JOB_ID.fullmatch(job_id):  # ids are ours (uuid4 hex): anything else never reaches the service
            raise ApiError(404, "not_found", "no such OCR job (job ids are 32 hexadecimal characters)")
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
