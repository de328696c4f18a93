"""Files read by the OCR service's ReadFile, and files stored in a collection as a job (no HTTP here).

A file in a collection is one document: its text (pages joined by blank lines) is cut into passages by
retrieval as any long document is, and its payload keeps the file's name, SHA-256, type, each page's
source and where each page starts in the text (``page_starts``), so a citation can name its page
(:func:`page_of`). Its id is ``file-`` and 24 hex digits of the SHA-256 unless the caller names one; the
same bytes sent again for the same id are a no-op (a marker per stored version of the collection, in the
gateway's store, removed when the document is deleted). Deleting the document removes every passage.
"""

from __future__ import annotations

import asyncio
import binascii
import bisect
import hashlib
import json
import time
from typing import Any

from clients.errors import MeshClientError
from clients.ocr import AsyncOcrClient, FileRead, Options
from clients.retrieval import AsyncRetrievalClient, Document
from gateway.catalog.serving import Catalog
from gateway.files import protocol as api
from gateway.files.budget import UploadBudget
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, from_client_error
from gateway.ocr.serving import lines_view
from gateway.tasks.store import KeyValue, StoreUnavailable
from services.runtime.jobs import Handler, JobContext, JobRecord

SOURCES = {"text_layer": "text_layer", "tesseract": "ocr", "vlm": "vlm"}
MARKER_TTL_S = 30 * 86400  # a marker lost (expired, evicted) only stores the same file once more
READ_TIMEOUT_S = 300.0  # a job's read of one file (pages needing OCR take ~0.5 s each on two cores)


DECODE_CHUNK = 1 << 20  # base64 characters decoded between two turns of the event loop (~5 ms)


async def decode(content_base64: str, field: str = "content_base64") -> bytes:
    """The file's bytes (400 for bad base64, 413 over :data:`api.MAX_FILE_BYTES`).

    Decoded a megabyte at a time, yielding the event loop between (binascii holds the GIL: a 27 MB
    string decoded at once held every other request for 120 ms, a thread would not have helped).
    """
    if len(content_base64) > (api.MAX_FILE_BYTES + 2) // 3 * 4:  # 413 before decoding
        raise ApiError(413, "payload_too_large", f"about {len(content_base64) * 3 // 4:,} bytes; a file may have "
                                                 f"at most {api.MAX_FILE_BYTES:,}")
    parts: list[bytes] = []
    try:
        for start in range(0, len(content_base64), DECODE_CHUNK):
            parts.append(binascii.a2b_base64(content_base64[start:start + DECODE_CHUNK], strict_mode=True))
            if start + DECODE_CHUNK < len(content_base64):
                await asyncio.sleep(0)
    except (binascii.Error, ValueError):
        raise ApiError(400, "invalid_argument", f"{field} is not valid base64",
                       fields=[FieldError(field=field, description="standard base64")]) from None
    return checked_size(b"".join(parts), field)


def checked_size(data: bytes, field: str) -> bytes:
    """413 for a file over :data:`api.MAX_FILE_BYTES`, 400 for an empty one."""
    if len(data) > api.MAX_FILE_BYTES:
        raise ApiError(413, "payload_too_large", f"{len(data):,} bytes; a file may have at most "
                                                 f"{api.MAX_FILE_BYTES:,}")
    if not data:
        raise ApiError(400, "invalid_argument", "the file is empty", fields=[FieldError(field=field,
                                                                                        description="zero bytes")])
    return data


def page_of(payload: dict[str, Any], start: int) -> int | None:
    """The 1-based page holding offset ``start`` of a stored file's text (None for other documents)."""
    starts = payload.get("page_starts")  # numbers come back from the store as floats
    if not isinstance(starts, list) or not starts or not all(isinstance(s, int | float) for s in starts):
        return None
    return bisect.bisect_right([int(s) for s in starts], start)


def file_view(read: FileRead, filename: str | None, data: bytes, ms: float) -> api.FileRead:
    """The REST view of a file's reading."""
    pages = [api.FilePage(index=p.index, text=p.text, source=SOURCES.get(p.engine, "ocr"),  # type: ignore[arg-type]
                          layer_problem=read.layer_problems.get(p.index), mean_confidence=round(p.mean_confidence, 2),
                          ms=round(p.ms, 2), image_width=p.image_size[0], image_height=p.image_size[1],
                          lines=lines_view(p)) for p in read.pages]
    return api.FileRead(kind=read.kind, filename=filename, sha256=hashlib.sha256(data).hexdigest(),  # type: ignore[arg-type]
                        bytes=len(data), text=read.text, pages=pages, ms=round(ms, 2))


def options_of(body: api.FileIn) -> Options:
    """How the OCR service reads the pages that need OCR."""
    return Options(languages=body.languages or "", fallback=body.vlm_fallback)


class Files:
    """``/v1/files:read`` and the ``file`` job of ``/v1/collections/{name}/files``."""

    def __init__(self, ocr: AsyncOcrClient, retrieval: AsyncRetrievalClient, store: KeyValue,
                 catalog: Catalog | None = None, budget: UploadBudget | None = None) -> None:
        self.ocr, self.retrieval, self.store = ocr, retrieval, store
        self.catalog = catalog  # set once the job store (which runs this feature's handler) exists
        self.budget = budget or UploadBudget(store, 0, 86400)

    async def read(self, data: bytes, body: api.FileIn, deadline: Deadline) -> api.FileRead:
        """Read one file now (400 naming what is wrong with it)."""
        start = time.perf_counter()
        try:
            read = await self.ocr.read_file(data, options_of(body), timeout_s=deadline.check())
        except MeshClientError as err:
            raise _named(err) from None
        # Thousands of words with boxes (a 100,000-character page): built off the event loop.
        return await asyncio.to_thread(file_view, read, body.filename, data, (time.perf_counter() - start) * 1e3)

    async def start_ingest(self, name: str, data: bytes, body: api.FileIngest, deadline: Deadline):
        """Queue the file's job (404 at once when the collection does not exist)."""
        sha = hashlib.sha256(data).hexdigest()
        token = await self.budget.reserve(len(data))
        # The upload rides in the job as raw bytes after a JSON header line (not base64 inside the JSON).
        header = json.dumps({"id": body.id or f"file-{sha[:24]}", "sha256": sha, "filename": body.filename,
                             "languages": body.languages or "", "vlm_fallback": body.vlm_fallback,
                             "budget_token": token}).encode()
        assert self.catalog is not None, "Files.catalog is set by the wiring"
        try:
            return await self.catalog.submit("file", name, header + b"\n" + data, 1, deadline)
        except BaseException:
            await self.budget.release(token)
            raise

    def handlers(self) -> dict[str, Handler]:
        """The job kinds this feature runs."""
        return {"file": self._ingest}

    @staticmethod
    def _marker(collection: str, doc_id: str) -> str:
        return f"files:{collection}:{doc_id}"

    async def forget(self, name: str, ids: list[str]) -> None:
        """Drop the markers of deleted documents (a file sent again is then stored again)."""
        try:
            physical = (await self.retrieval.get_collection(name, timeout_s=5)).collection
            for doc_id in ids:
                await self.store.set(self._marker(physical, doc_id), "", 1)
        except (MeshClientError, StoreUnavailable):
            pass  # a marker left behind only makes the same file a no-op until the collection is rebuilt

    async def _ingest(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any]:
        header, _, data = payload.partition(b"\n")
        work = json.loads(header)
        try:
            return await self._ingest_file(record, work, data, ctx)
        finally:
            await self.budget.release(work.get("budget_token", ""))

    async def _ingest_file(self, record: JobRecord, work: dict[str, Any], data: bytes,
                           ctx: JobContext) -> dict[str, Any]:
        doc_id, sha = work["id"], work["sha256"]
        physical = (await self.retrieval.get_collection(record.subject, timeout_s=10)).collection
        marker = self._marker(physical, doc_id)
        try:
            if await self.store.get(marker) == sha:
                await ctx.progress(done=1)
                return {"id": doc_id, "sha256": sha, "unchanged": True}
        except StoreUnavailable:
            pass
        t = time.perf_counter()
        try:
            read = await self.ocr.read_file(data,
                                            Options(languages=work["languages"], fallback=work["vlm_fallback"]),
                                            timeout_s=READ_TIMEOUT_S)
        except MeshClientError as err:
            await ctx.progress(error=f"the file cannot be read: {err.message}")
            return {"id": doc_id, "sha256": sha, "error": err.message}
        read_ms = (time.perf_counter() - t) * 1e3
        text, starts = "", []
        for p in read.pages:
            starts.append(len(text) + (2 if text else 0))
            text = f"{text}\n\n{p.text}" if text else p.text
        if not text.strip():
            await ctx.progress(error="the file holds no text")
            return {"id": doc_id, "sha256": sha, "error": "no text"}
        doc = Document(doc_id, text, {"filename": work["filename"], "sha256": sha, "kind": read.kind,
                                      "pages": len(read.pages), "page_starts": starts,
                                      "page_sources": [SOURCES.get(p.engine, "ocr") for p in read.pages]})
        t = time.perf_counter()
        try:
            await self.retrieval.upsert(record.subject, [doc], timeout_s=READ_TIMEOUT_S)
        except MeshClientError as err:
            await ctx.progress(error=f"{err.code.name}: {err.message}")
            return {"id": doc_id, "sha256": sha, "error": err.message}
        write_ms = (time.perf_counter() - t) * 1e3
        try:
            await self.store.set(marker, sha, MARKER_TTL_S)
        except StoreUnavailable:
            pass
        await ctx.progress(done=1)
        return {"id": doc_id, "sha256": sha, "kind": read.kind, "pages": len(read.pages), "characters": len(text),
                "sources": {s: sum(1 for p in read.pages if SOURCES.get(p.engine) == s) for s in set(SOURCES.values())},
                "read_ms": round(read_ms, 1), "write_ms": round(write_ms, 1)}


def _named(err: MeshClientError) -> ApiError:
    out = from_client_error(err)
    for f in out.body.error.fields:
        f.field = "file" if f.field in ("content", "") else f.field
    return out
