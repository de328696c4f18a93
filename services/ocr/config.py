"""Settings of the OCR service process (env prefix ``MESH_OCR_``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.runtime.settings import ServiceSettings


class OcrSettings(ServiceSettings):
    """OCR service: Tesseract kor+eng first, a VLM only when it fails; multi-page jobs in Redis."""

    model_config = SettingsConfigDict(env_prefix="MESH_OCR_")

    port: int = Field(50054, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    tessdata: str = Field("", description="tessdata folder (default: TESSDATA_PREFIX or Debian's)")
    languages: str = Field("kor+eng", pattern=r"^[a-z_]+(\+[a-z_]+)*$",
                           description="default Tesseract languages")
    engines: int = Field(2, ge=1, le=32, description="loaded Tesseract engines = parallel pages")
    max_pending: int = Field(32, ge=1, description="Extract calls waiting for an engine before RESOURCE_EXHAUSTED")
    max_bytes: int = Field(20_000_000, ge=1024, description="largest upload in bytes")
    max_pixels: int = Field(40_000_000, ge=10_000, description="largest decoded image (decompression-bomb guard)")
    max_pages: int = Field(50, ge=1, description="most pages in one job")
    max_sync_pages: int = Field(2, ge=1, description="most PDF pages Extract reads at once (more: use a job)")
    max_file_pages: int = Field(1000, ge=1, le=100_000, description="most pages of a PDF ReadFile reads (text "
                                                                     "layers are cheap: ~ms a page)")
    max_file_ocr_pages: int = Field(10, ge=0, le=1000, description="most pages without a usable text layer "
                                                                    "ReadFile reads by OCR in one call (more: "
                                                                    "a job)")
    max_page_chars: int = Field(100_000, ge=100, description="most characters of one PDF page's text layer "
                                "(counted before any is read; more: a 400 naming it)")
    max_file_chars: int = Field(2_000_000, ge=1000, description="most characters of text one file holds, all pages "
                                "together (PDF layers, DOCX, HTML, plain text)")
    max_xml_bytes: int = Field(40_000_000, ge=10_000, description="most bytes a DOCX's XML parts inflate to")
    max_nodes: int = Field(2_000_000, ge=1000, description="most elements of one DOCX body or HTML page")
    file_budget_s: float = Field(8.0, gt=0, le=300, description="wall time one file's reading may take in its "
                                 "child process (parsing, text layers, rendering pages for OCR) before it is "
                                 "stopped and answered with a 400 naming this budget")
    file_memory_mb: int = Field(2048, ge=256, description="address space of the child process reading one file")
    file_readers: int = Field(2, ge=1, le=32, description="files read at once (child processes); more wait")
    max_side: int = Field(1920, ge=256, description="long side of the image Tesseract reads")
    pdf_dpi: int = Field(200, ge=72, le=600, description="PDF render resolution")
    deskew: bool = Field(True, description="straighten skewed text lines before OCR")
    smooth_radius: float = Field(0.0, ge=0, le=5, description="Gaussian blur radius before OCR (0: off; "
                                 "a fixed blur hurt photographed pages and covers)")
    flatten: bool = Field(True, description="flatten backgrounds, invert light text, stretch low contrast per page")
    line_height: int = Field(48, ge=16, le=120, description="height lines of uneven or extreme size are scaled to")
    min_plausible_confidence: float = Field(70.0, ge=0, le=100, description="confidence minus 100 x the share "
                                            "of implausible (Kiwi-checked Korean) characters below which OCR failed")
    max_uncovered: float = Field(0.15, ge=0, le=1, description="share of the page's ink outside every line read "
                                                               "above which OCR failed (dropped text)")
    compare_as_uploaded: bool = Field(True, description="also read pages needing no inversion as uploaded, "
                                      "keeping the better reading (a second engine's time; needs --flatten)")
    accept_as_uploaded: float | None = Field(
        88.0, ge=0, le=100, description="read each page as uploaded at once, beside its preparation, then keep the "
                                        "first of the two readings to finish alone, without waiting for the other, "
                                        "when its quality (confidence - 100 x implausible and unread-ink shares) "
                                        "reaches this (the upload's not on a page preparation turned); 88 chosen "
                                        "on bench/ocr_tune.py's split (the lowest bar keeping every category's CER "
                                        "at or below plain Tesseract's); empty: always both, prepared first")
    read_clean_once: bool = Field(True, description="read a page that looks clean (preparation neither turned, "
                                  "inverted nor rescaled it; quiet paper, flat background, strong ink) only as "
                                  "uploaded, without a prepared reading, unless that reading fails; the bounds "
                                  "were chosen on bench/ocr_tune.py's split (needs --accept-as-uploaded)")
    one_reading_when_busy: bool = Field(True, description="while more pages are being read than half the engines, "
                                        "read each page one way only (the prepared page; a clean page as "
                                        "uploaded): two readings a page would halve throughput under load")
    min_confidence: float = Field(60.0, ge=0, le=100, description="mean confidence below which OCR failed")
    max_low_word_share: float = Field(0.4, ge=0, le=1,
                                      description="share of words under 50 confidence above which OCR failed")
    vlm_kind: Literal["openai", "gemini"] = Field("openai", description="VLM protocol for the fallback")
    vlm_url: str = Field("", description="OpenAI-compatible base URL (…/v1); empty turns the fallback off")
    vlm_model: str = Field("", description="VLM model name")
    vlm_api_key: SecretStr = Field(SecretStr(""), description="VLM API key (Gemini needs one)")
    vlm_timeout_s: float = Field(30.0, gt=0, description="timeout of one VLM call")
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis holding job state")
    redis_timeout_s: float = Field(2.0, gt=0, description="timeout of one Redis call")
    job_ttl_s: int = Field(86400, ge=10, description="how long a job and its result stay queryable after its "
                                                     "last change")
    job_lease_s: float = Field(15.0, gt=0, description="a worker's lease: this long after an instance dies, "
                                                       "another requeues its running jobs")
    max_queued_jobs: int = Field(1000, ge=1, description="queued jobs before SubmitJob answers RESOURCE_EXHAUSTED")
    max_store_bytes: int = Field(256 * 1024 * 1024, ge=1024 * 1024,
                                 description="Redis memory (uploads, results) above which SubmitJob answers "
                                             "RESOURCE_EXHAUSTED instead of storing more")
    png_bytes_per_page: int = Field(1024 * 1024, ge=0, description="what a masked page's PNG is counted as at "
                                                                   "admission against --max-store-bytes (a masking "
                                                                   "job that asks for PNGs stores one per page)")
    reread_labels: bool = Field(True, description="masking: read a labelled line again (one line, the kind's "
                                                  "characters only) where the first read found no value after "
                                                  "its label (이메일, 연락처, 주민등록번호 …)")
    fit_masks: bool = Field(True, description="fit masking boxes to the ink of their characters (trimmed, or grown "
                                              "through a character the box cuts); off: OCR's boxes as read")
    mask_margin_px: int = Field(2, ge=0, le=50, description="pixels a masked box is grown by on every side, beyond "
                                                           "the ink it was fitted to")
    png_ttl_s: int = Field(3600, ge=60, description="how long a masking job's masked PNGs are kept after the last "
                                                    "one was written (their own TTL, shorter than the job's: the "
                                                    "findings stay for --job-ttl-s)")
    ocr_cache_ttl_s: int = Field(7 * 86400, ge=0, description="how long a page's reading stays in the OCR cache "
                                 "(Redis, keyed by the upload's bytes, options and engine revision); 0 turns it off")
    cache_redis_url: str = Field("", description="Redis of the OCR cache: an evicting one (allkeys-lru, the "
                                                 "gateway's cache Redis), so cached pages never fill the job store; "
                                                 "empty: --redis-url (the job store's, which does not evict)")
    job_workers: int = Field(1, ge=0, le=32, description="concurrent jobs in this process (0: submit only)")
