"""The OCR cache: an upload's pages kept in Redis by what decides them, so a repeated upload is not read again.

The key is the SHA-256 of the upload's bytes, the request's options and the *engine revision* — the
Tesseract version, this module's ``READER_REVISION`` (raised when the reading code changes what it
returns) and the service's settings that change a reading (languages, preprocessing, fallback policy,
VLM). A hit comes back with ``cached`` set on every page. Entries expire ``--ocr-cache-ttl-s`` after
they were written.

The cache fails open: a Redis error or a slow answer (``--redis-timeout-s``) is a miss on read and
nothing on write — the page is read as if there were no cache — and counted in
``mesh_ocr_cache_total{outcome="error"}``. Nothing of the upload's text is logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import asdict
from typing import Any

from prometheus_client import Counter

from services.ocr.extractor import ExtractOptions, PageResult
from services.ocr.results import page_from_dict

log = logging.getLogger(__name__)
DETERMINED = ("vlm_disabled", "fallback disabled")  # fallback errors that a later reading repeats
READER_REVISION = "3"  # a PDF page's text layer read instead of OCR when usable (issue 62)
OUTCOMES = Counter("mesh_ocr_cache", "OCR cache look-ups and writes by outcome", ["outcome"])
for _outcome in ("hit", "miss", "error", "stored"):
    OUTCOMES.labels(_outcome)


class OcrCache:
    """Pages by (upload, options, engine revision) in Redis, with a TTL; every failure is a miss."""

    def __init__(self, redis: Any, *, ttl_s: int, timeout_s: float, revision: str,
                 prefix: str = "ocr-cache") -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.revision = revision
        self.prefix = prefix

    def key(self, data: bytes, options: ExtractOptions, max_pages: int | None = None) -> str:
        """The cache key of one upload read with ``options`` (``max_pages`` bounds an Extract's PDF)."""
        digest = hashlib.sha256(data)
        digest.update(json.dumps([asdict(options), max_pages, self.revision], sort_keys=True).encode())
        return f"{self.prefix}:{digest.hexdigest()}"

    async def get(self, key: str) -> list[PageResult] | None:
        """The upload's pages (marked ``cached``), or None on a miss or any failure."""
        try:
            raw = await asyncio.wait_for(self.redis.get(key), self.timeout_s)
        except Exception as err:  # noqa: BLE001 - fail open: the page is read instead
            OUTCOMES.labels("error").inc()
            log.warning("OCR cache read failed (%s); reading the upload instead", type(err).__name__)
            return None
        if raw is None:
            OUTCOMES.labels("miss").inc()
            return None
        OUTCOMES.labels("hit").inc()
        pages = [page_from_dict(p) for p in json.loads(raw)]
        for page in pages:
            page.cached = True
        return pages

    async def put(self, key: str, pages: list[PageResult]) -> None:
        """Keep the pages (fail open: an error is logged and counted, never raised)."""
        if any(p.fallback_reason and p.engine != "vlm" and not p.fallback_error.startswith(DETERMINED)
               for p in pages):
            return  # the VLM failed on a page: it may answer later, so the reading is not kept
        payload = json.dumps([asdict(p) for p in pages], ensure_ascii=False)
        try:
            await asyncio.wait_for(self.redis.set(key, payload, ex=self.ttl_s), self.timeout_s)
        except Exception as err:  # noqa: BLE001 - fail open
            OUTCOMES.labels("error").inc()
            log.warning("OCR cache write failed (%s); the reading is returned uncached", type(err).__name__)
            return
        OUTCOMES.labels("stored").inc()
