"""OCR jobs' REST models (contract v1; fields are only ever added)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gateway.http.models import Strict


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


PiiKind = Literal["resident_number", "alien_number", "phone", "email", "url", "handle", "card", "bank_account",
                  "passport", "driver_license", "birth_date", "address", "person"]


class PiiDetectRequest(Strict):
    """A text and what personal data to find in it."""

    text: str = Field(min_length=1, max_length=200_000, examples=["성명: 홍길동\n휴대폰: 010-1234-5678"])
    kinds: list[PiiKind] | None = Field(None, min_length=1, max_length=13, description="kinds to find; default: all")
    mask: bool = Field(False, description="also return `masked_text`, every span masked with `*`")
    keep: bool = Field(False, description="mask partially: a phone number's first digits, a resident number's "
                                          "birth date and gender digit, a name's surname, an e-mail's first "
                                          "character and domain stay readable")
    company_lines: bool = Field(False, description="also find company lines (a landline marked 대표/팩스/"
                                                   "고객센터, 15xx numbers); by default they are not personal data")
    threshold: float | None = Field(None, ge=0, le=1, description="the least score a span needs (default 0.5)")


class PiiSpan(BaseModel):
    """One finding: `text[start:end]` of the request (code points) is personal data of `kind`."""

    kind: PiiKind
    start: int
    end: int
    score: float
    rule: str = Field(description="the rule that fired, e.g. `rrn:date+checksum`, `account:context`")
    text: str


class PiiDetectResponse(BaseModel):
    """Every span found, in text order, non-overlapping; the masked text when asked."""

    spans: list[PiiSpan]
    masked_text: str | None = None
    detect_ms: float = Field(description="the detector's time in the OCR service")
