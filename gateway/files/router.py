"""Files routes: read a file now, or store it in a collection as a job. Multipart upload or base64 JSON."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from gateway.catalog import protocol as catalog_api
from gateway.files import protocol as api
from gateway.files.serving import Files, checked_size, decode
from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError, documented

ERRORS = documented(400, 401, 404, 413, 429, 503, 504, described=False)
router = APIRouter(tags=["files"])
Body = TypeVar("Body", bound=api.FileIn)


def _files(request: Request) -> Files:
    return request.app.state.mesh.files


def _body_doc(model: type[api.FileIn]) -> dict[str, Any]:
    """The request body as OpenAPI states it: JSON (base64) or multipart (the file as ``file``)."""
    schema = model.model_json_schema()  # flat: no definitions to refer to
    form = {"type": "object", "required": ["file"],
            "properties": {"file": {"type": "string", "format": "binary"},
                           **{k: v for k, v in schema["properties"].items() if k != "content_base64"}}}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema},
                                                          "multipart/form-data": {"schema": form}}}}


async def _upload(request: Request, model: type[Body]) -> tuple[bytes, Body]:
    """The file's bytes and the request's fields, from multipart form data or base64 JSON."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form(max_files=1, max_fields=16, max_part_size=api.MAX_FILE_BYTES + 1)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "invalid_argument", "multipart upload without a file", fields=[
                FieldError(field="file", description="the file, as the form field `file`")])
        data = checked_size(await upload.read(api.MAX_FILE_BYTES + 1), "file")
        fields: dict[str, Any] = {k: v for k, v in form.items() if k != "file" and isinstance(v, str)}
        fields.setdefault("filename", upload.filename)
        if "vlm_fallback" in fields:
            fields["vlm_fallback"] = fields["vlm_fallback"].lower() in ("1", "true", "yes")
        try:
            return data, model.model_validate({**fields, "content_base64": "-"})
        except ValidationError as err:
            raise RequestValidationError(err.errors()) from None
    try:
        raw = await request.json()
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser reads (as FastAPI answers)
        raise ApiError(400, "invalid_argument", "the body is neither JSON nor multipart/form-data (or it is "
                                                "nested too deep to read)") from None
    try:
        body = model.model_validate(raw)
    except ValidationError as err:
        raise RequestValidationError(err.errors()) from None
    return await decode(body.content_base64), body


@router.post("/v1/files:read", response_model=api.FileRead, responses=ERRORS, openapi_extra=_body_doc(api.FileIn))
async def read_file(request: Request, dl: Deadline = deadline.ADMIN):
    """Read one file now: PDF, Word (DOCX), HTML, plain text or an image, its type read from the bytes.

    A PDF page with a usable text layer is read from it (`source: text_layer`, word boxes exact); a page
    without one — a scan — is rendered and read by OCR (`source: ocr`, or `vlm` when Tesseract failed).
    Bounds, each a 400 or 413 naming it: 20 MB, 1,000 PDF pages, 10 pages needing OCR (more: an OCR
    job), a zip that inflates too far, an encrypted PDF, a type none of these.
    """
    data, body = await _upload(request, api.FileIn)
    view = await _files(request).read(data, body, dl)
    # Serialized here, off the loop: FastAPI would validate and encode the whole model again on it.
    return Response(await asyncio.to_thread(view.model_dump_json), media_type="application/json")


@router.post("/v1/collections/{name}/files", response_model=catalog_api.Job, status_code=202, responses=ERRORS,
             openapi_extra=_body_doc(api.FileIngest), tags=["collections"])
async def add_file(name: str, request: Request, dl: Deadline = deadline.ADMIN):
    """Store a file in a collection as one document (a job): read, cut into passages, embedded.

    Each passage keeps its place in the file's text, and the document's payload keeps the file's name,
    SHA-256, type, page count, each page's source and where each page starts (`page_starts`), so a
    grounded answer's citation names its `page`. The same bytes for the same id again: the job
    succeeds with `unchanged: true`. Deleting the document (`POST .../documents:delete`) removes every passage.
    """
    data, body = await _upload(request, api.FileIngest)
    out = await _files(request).start_ingest(name, data, body, dl)
    return JSONResponse(out.model_dump(), status_code=202, headers={"Location": f"/v1/jobs/{out.id}"})
