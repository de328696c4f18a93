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


class OcrExtractRequest(Strict):
    """One image, or a PDF of at most two pages, read now under the request's deadline."""

    content_base64: str = Field(min_length=1, description="the file's bytes, standard base64 (at most 10 MB "
                                                          "decoded; a longer document is a job: /v1/ocr/jobs)")
    filename: str | None = Field(None, max_length=255, description="for your own bookkeeping; not used")
    languages: str | None = Field(None, pattern=r"^[a-z_]+(\+[a-z_]+)*$", examples=["kor+eng"],
                                  description="Tesseract languages (default: the service's, kor+eng)")
    vlm_fallback: bool = Field(True, description="allow the VLM when Tesseract fails (if one is configured)")
    deskew: bool = Field(True, description="straighten skewed text lines first")


class OcrWord(BaseModel):
    """A recognised word; box is [left, top, width, height] in the uploaded image's pixels."""

    text: str
    confidence: float
    box: list[int]


class OcrLine(BaseModel):
    """A recognised line; box is [left, top, width, height] in the page's OCR pixel space."""

    text: str
    confidence: float
    box: list[int]
    image_box: list[int] | None = Field(None, description="[left, top, width, height] around the line's words in "
                                        "the uploaded image's pixels (after EXIF orientation; deskew and "
                                        "rescaling undone)")
    words: list[OcrWord] = Field(default_factory=list, description="the line's words with boxes in the uploaded "
                                                                   "image (none for a VLM reading)")


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
    image_width: int = Field(0, description="the uploaded image's size (after EXIF orientation): word boxes are "
                                            "in it")
    image_height: int = 0
    cached: bool = Field(False, description="the reading came from the OCR cache (same bytes, options and engine)")


class OcrResult(BaseModel):
    """A finished job's text and pages."""

    text: str
    pages: list[OcrPage]


class JobState(BaseModel):
    """What every job of the OCR service reports (OCR and masking jobs)."""

    id: str
    state: Literal["queued", "running", "succeeded", "failed"]
    pages_total: int
    pages_done: int
    error: str = ""
    created_unix_ms: int
    updated_unix_ms: int
    expires_unix_ms: int


class OcrJob(JobState):
    """An OCR job; ``result`` is present once ``state`` is ``succeeded``."""

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


class MaskingJobRequest(Strict):
    """Images or PDFs to find personal data on; each page's findings come back as boxes."""

    documents: list[OcrDocument] = Field(min_length=1, max_length=50)
    kinds: list[PiiKind] | None = Field(None, min_length=1, max_length=13, description="kinds to find; default: all")
    keep: bool = Field(False, description="mask partially: only what the masked text would hide is blacked out "
                                          "(a phone number's first digits, a name's surname stay readable)")
    company_lines: bool = Field(False, description="also find company lines (대표/팩스/고객센터, 15xx numbers)")
    threshold: float | None = Field(None, ge=0, le=1, description="the least score a finding needs (default 0.5)")
    masked_png: bool = Field(False, description="also render every page with its findings blacked out "
                                                "(GET .../pages/{n}.png)")
    pictures: bool = Field(True, description="also find photographs (an ID photo, a portrait: the faces in them) "
                                             "and mask each whole (`pictures` of each page); false: text only")
    languages: str | None = Field(None, pattern=r"^[a-z_]+(\+[a-z_]+)*$", examples=["kor+eng"],
                                  description="Tesseract languages (default: the service's, kor+eng)")
    deskew: bool = Field(True, description="straighten skewed text lines first")


class MaskedEntity(BaseModel):
    """Personal data on a page: where it is, and what is blacked out, in the uploaded image's pixels."""

    kind: PiiKind
    score: float
    rule: str
    text: str = Field(description="the text as read (returned to you only; never logged)")
    box: list[int] = Field(description="[left, top, width, height] around the words (or parts) it spans")
    masked: list[list[int]] = Field(description="the boxes blacked out: one per line it spans (with `keep`, "
                                                "only the hidden characters)")


class MaskedPicture(BaseModel):
    """A photograph on a page, found by its pixels (services/ocr/pictures.py), masked whole."""

    kind: Literal["photo"]
    score: float
    box: list[int] = Field(description="[left, top, width, height] in the uploaded image's pixels")


class MaskedPage(BaseModel):
    """What was found on one page."""

    index: int
    image_width: int
    image_height: int
    entities: list[MaskedEntity]
    png_url: str | None = Field(None, description="the masked page, when `masked_png` was asked")
    cached: bool = Field(description="the page's reading came from the OCR cache")
    mean_confidence: float
    fallback_reason: str = Field(description="why Tesseract's reading was judged a failure (findings may be "
                                             "missing); empty if accepted")
    ms: float = Field(description="time spent on this page (reading, finding, masking)")
    pictures: list[MaskedPicture] = Field(default_factory=list, description="photographs on the page, each "
                                                                             "masked whole")


class MaskingResult(BaseModel):
    """A finished masking job's pages."""

    pages: list[MaskedPage]


class MaskingJob(JobState):
    """A masking job; ``result`` is present once ``state`` is ``succeeded``."""

    result: MaskingResult | None = None
