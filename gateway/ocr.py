"""OCR job routes of the REST contract: submit (202 + job id), then poll until the result is in."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from mesh.ocr.v1 import ocr_pb2 as pb
from pydantic import BaseModel, Field

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient
from gateway.errors import ApiError, ErrorBody, FieldError, from_client_error
from gateway.protocol import Strict

STATES = {pb.JOB_STATE_QUEUED: "queued", pb.JOB_STATE_RUNNING: "running", pb.JOB_STATE_SUCCEEDED: "succeeded",
          pb.JOB_STATE_FAILED: "failed"}
ENGINES = {pb.ENGINE_TESSERACT: "tesseract", pb.ENGINE_VLM: "vlm"}


class OcrDocument(Strict):
    """One upload: an image (PNG, JPEG, TIFF, WebP, BMP, GIF) or a PDF, base64-encoded."""

    content_base64: str = Field(min_length=1, description="the file's bytes, standard base64")
    filename: str | None = Field(None, max_length=255, description="for your own bookkeeping; not used")


class OcrJobRequest(Strict):
    """Pages are read in the order of ``documents`` (PDF pages expanded in place)."""

    documents: list[OcrDocument] = Field(min_length=1, max_length=50)
    languages: str | None = Field(None, pattern=r"^[a-z_]+(\+[a-z_]+)*$", examples=["kor+eng"],
                                  description="Tesseract languages (default: the service's, kor+eng)")
    vlm_fallback: bool = Field(True, description="allow the VLM when Tesseract fails (if one is configured)")
    deskew: bool = Field(True, description="straighten skewed text lines first")


class OcrLine(BaseModel):
    """A recognised line; box is [left, top, width, height] in the page's OCR pixel space."""

    text: str
    confidence: float
    box: list[int]


class OcrPage(BaseModel):
    """What was read from one page."""

    index: int
    text: str
    engine: Literal["tesseract", "vlm"]
    mean_confidence: float
    fallback_reason: str = Field(description="why Tesseract's answer was judged a failure; empty if accepted")
    fallback_error: str = Field(description="why the VLM was not used or failed; empty otherwise")
    skew_degrees: float
    lines: list[OcrLine]
    ms: float = Field(description="time spent on this page")


class OcrResult(BaseModel):
    """A finished job's text and pages."""

    text: str
    pages: list[OcrPage]


class OcrJob(BaseModel):
    """An OCR job; ``result`` is present once ``state`` is ``succeeded``."""

    id: str
    state: Literal["queued", "running", "succeeded", "failed"]
    pages_total: int
    pages_done: int
    error: str = ""
    created_unix_ms: int
    updated_unix_ms: int
    expires_unix_ms: int
    result: OcrResult | None = None


ERRORS: dict[int | str, dict] = {code: {"model": ErrorBody} for code in (400, 401, 404, 413, 429, 503, 504)}
JOB_ID = re.compile(r"[0-9a-f]{32}")
router = APIRouter(tags=["ocr"])


def _job(job: pb.Job, result: pb.GetJobResultResponse | None = None) -> OcrJob:
    out = OcrJob(id=job.job_id, state=STATES.get(job.state, "queued"), pages_total=job.pages_total,  # type: ignore[arg-type]
                 pages_done=job.pages_done, error=job.error, created_unix_ms=job.created_unix_ms,
                 updated_unix_ms=job.updated_unix_ms, expires_unix_ms=job.expires_unix_ms)
    if result is not None:
        out.result = OcrResult(text=result.text, pages=[OcrPage(
            index=p.index, text=p.text, engine=ENGINES.get(p.engine, "tesseract"),  # type: ignore[arg-type]
            mean_confidence=round(p.mean_confidence, 2), fallback_reason=p.fallback_reason,
            fallback_error=p.fallback_error, skew_degrees=round(p.skew_degrees, 2),
            ms=round(p.timings.total_ns / 1e6, 2),
            lines=[OcrLine(text=ln.text, confidence=round(ln.confidence, 2),
                           box=[ln.box.left, ln.box.top, ln.box.width, ln.box.height]) for ln in p.lines])
            for p in result.pages])
    return out


def _client(request: Request) -> AsyncOcrClient:
    return request.app.state.ocr


@router.post("/v1/ocr/jobs", response_model=OcrJob, status_code=202, responses=ERRORS)
async def submit_ocr_job(body: OcrJobRequest, request: Request):
    """Queue images/PDFs for OCR; answers 202 with the job and a `Location` to poll."""
    contents = []
    for i, doc in enumerate(body.documents):
        try:
            contents.append(base64.b64decode(doc.content_base64, validate=True))
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_argument", "a document is not valid base64", fields=[
                FieldError(field=f"documents[{i}].content_base64", description="standard base64")]) from None
    options = pb.Options(languages=body.languages or "", disable_fallback=not body.vlm_fallback,
                         disable_deskew=not body.deskew)
    try:
        job = await _client(request).submit_job(contents, options, timeout_s=60)
    except MeshClientError as err:
        api_err = from_client_error(err)
        for f in api_err.body.error.fields:  # the service names uploads contents[i]
            f.field = f.field.replace("contents[", "documents[")
        raise api_err from None
    out = _job(job)
    return JSONResponse(out.model_dump(), status_code=202, headers={"Location": f"/v1/ocr/jobs/{out.id}"})


@router.get("/v1/ocr/jobs/{job_id}", response_model=OcrJob, responses=ERRORS)
async def get_ocr_job(job_id: str, request: Request):
    """A job's state and progress; once it succeeded, its result (text, pages, lines)."""
    if not JOB_ID.fullmatch(job_id):  # ids are ours (uuid4 hex): anything else never reaches the service
        raise ApiError(404, "not_found", "no such OCR job (job ids are 32 hexadecimal characters)")
    client = _client(request)
    try:
        job = await client.get_job(job_id, timeout_s=10)
        result = await client.get_job_result(job_id, timeout_s=30) if job.state == pb.JOB_STATE_SUCCEEDED else None
    except MeshClientError as err:
        raise from_client_error(err) from None
    return _job(job, result)
