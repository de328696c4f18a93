"""OCR job routes: submit (202 + job id and `Location`), then poll until the result is in."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.ocr import protocol as api
from gateway.ocr.serving import Ocr

ERRORS = documented(400, 401, 404, 413, 429, 503, 504, described=False)
router = APIRouter(tags=["ocr"])


def _ocr(request: Request) -> Ocr:
    return request.app.state.mesh.ocr


@router.post("/v1/ocr/jobs", response_model=api.OcrJob, status_code=202, responses=ERRORS)
async def submit_ocr_job(body: api.OcrJobRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Queue images/PDFs for OCR; answers 202 with the job and a `Location` to poll."""
    out = await _ocr(request).submit(body, dl)
    return JSONResponse(out.model_dump(), status_code=202, headers={"Location": f"/v1/ocr/jobs/{out.id}"})


@router.get("/v1/ocr/jobs/{job_id}", response_model=api.OcrJob, responses=ERRORS)
async def get_ocr_job(job_id: str, request: Request, dl: Deadline = deadline.ADMIN):
    """A job's state and progress; once it succeeded, its result (text, pages, lines)."""
    return await _ocr(request).job(job_id, dl)


@router.post("/v1/pii:detect", response_model=api.PiiDetectResponse, responses=ERRORS, tags=["pii"])
async def detect_pii(body: api.PiiDetectRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Personal data in Korean text, as spans with offsets; the masked text on request (`mask`, `keep`).

    Kinds: resident and alien numbers, phones, e-mail, URLs, handles, cards, bank accounts, passports,
    driver's licences, dates of birth, addresses and names. What is found goes to the caller only:
    never logged or traced.
    """
    return await _ocr(request).detect_pii(body, dl)
