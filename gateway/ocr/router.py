"""OCR job routes: submit (202 + job id and `Location`), then poll until the result is in."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse, Response

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


@router.post("/v1/ocr:extract", response_model=api.OcrResult, responses=ERRORS)
async def extract_text(body: api.OcrExtractRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Read one image (or a PDF of at most two pages) now: text, lines and words with boxes.

    Word boxes are in the uploaded image's pixels. A repeated upload is answered from the OCR cache
    (`cached: true`).
    """
    return await _ocr(request).extract(body, dl)


@router.post("/v1/masking/jobs", response_model=api.MaskingJob, status_code=202, responses=ERRORS, tags=["pii"])
async def submit_masking_job(body: api.MaskingJobRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Queue images/PDFs (résumés, portfolios) whose personal data is to be boxed; 202 with a `Location` to poll.

    Each page is read (or taken from the OCR cache), personal data found in its text and mapped back to
    the words it spans; with `masked_png` each page is also rendered with the findings blacked out. The
    images, their text and what is found are never logged.
    """
    out = await _ocr(request).submit_masking(body, dl)
    return JSONResponse(out.model_dump(), status_code=202, headers={"Location": f"/v1/masking/jobs/{out.id}"})


@router.get("/v1/masking/jobs/{job_id}", response_model=api.MaskingJob, responses=ERRORS, tags=["pii"])
async def get_masking_job(job_id: str, request: Request, dl: Deadline = deadline.ADMIN):
    """A masking job's state; once it succeeded, each page's findings with boxes (and `png_url` if asked)."""
    return await _ocr(request).masking_job(job_id, dl)


@router.get("/v1/masking/jobs/{job_id}/pages/{index}.png", response_class=Response, tags=["pii"],
            responses={**ERRORS, 200: {"content": {"image/png": {}}, "description": "the masked page"}})
async def get_masked_page(job_id: str, request: Request, index: int = Path(ge=0, le=10_000),
                          dl: Deadline = deadline.ADMIN):
    """One page of a finished masking job with its findings blacked out, as PNG."""
    png = await _ocr(request).masked_png(job_id, index, dl)
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, no-store"})


@router.post("/v1/pii:detect", response_model=api.PiiDetectResponse, responses=ERRORS, tags=["pii"])
async def detect_pii(body: api.PiiDetectRequest, request: Request, dl: Deadline = deadline.ADMIN):
    """Personal data in Korean text, as spans with offsets; the masked text on request (`mask`, `keep`).

    Kinds: resident and alien numbers, phones, e-mail, URLs, handles, cards, bank accounts, passports,
    driver's licences, dates of birth, addresses and names. What is found goes to the caller only:
    never logged or traced.
    """
    return await _ocr(request).detect_pii(body, dl)
