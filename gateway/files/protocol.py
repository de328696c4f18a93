"""The files routes' request and response bodies."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gateway.http.models import Strict
from gateway.ocr.protocol import OcrLine

MAX_FILE_BYTES = 20_000_000  # as the OCR service's --max-bytes default


class FileIn(Strict):
    """One file as base64 JSON (or send it as ``multipart/form-data``: the field ``file``, the rest as fields)."""

    content_base64: str = Field(min_length=1, description="the file's bytes, standard base64 (at most 20 MB "
                                                          "decoded); its type is read from the bytes, not the name")
    filename: str | None = Field(None, max_length=255, description="kept with what is read; never used for its type")
    languages: str | None = Field(None, pattern=r"^[a-z_]+(\+[a-z_]+)*$", examples=["kor+eng"],
                                  description="Tesseract languages for pages read by OCR (default kor+eng)")
    vlm_fallback: bool = Field(True, description="allow the VLM when Tesseract fails on a page (if one is set)")


class FileIngest(FileIn):
    """A file for a collection: read, cut into passages, embedded and stored as one document."""

    id: str | None = Field(None, min_length=1, max_length=256,
                           description="the document's id (default: `file-` and the first 24 hex digits of the "
                                       "file's SHA-256, so the same file is the same document)")


class FilePage(BaseModel):
    """One page: its text, where the text came from, and lines with word boxes."""

    index: int
    text: str
    source: Literal["text_layer", "ocr", "vlm"] = Field(
        description="`text_layer`: the file's own text (a PDF page's text layer, a Word, HTML or text file); "
                    "`ocr`: Tesseract read the page as rendered; `vlm`: the vision model did, Tesseract having failed")
    layer_problem: str | None = Field(None, description="why a PDF page's text layer was not used (`no_text_layer`, "
                                                        "`unmapped_glyphs`, `implausible_text`)")
    mean_confidence: float = Field(description="Tesseract's mean word confidence; 100 for a text layer")
    ms: float
    image_width: int = Field(0, description="the page as rendered (a PDF page at the OCR service's resolution, "
                                            "200 dpi): word boxes are in its pixels")
    image_height: int = 0
    lines: list[OcrLine] = Field(default_factory=list)


class FileRead(BaseModel):
    """What a file holds."""

    kind: Literal["pdf", "docx", "html", "text", "image"] = Field(description="the type read from the bytes")
    filename: str | None = None
    sha256: str
    bytes: int
    text: str = Field(description="every page's text, pages separated by a blank line")
    pages: list[FilePage]
    ms: float
