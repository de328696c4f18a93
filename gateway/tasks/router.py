"""``GET /v1/tasks``, ``POST /v1/tasks/{name}`` (JSON), ``POST /v1/tasks/{name}:stream`` (SSE)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from gateway.files.protocol import FileIn
from gateway.files.serving import decode
from gateway.http.deadline import TIMEOUT_HEADER, Deadline, parse_timeout
from gateway.http.errors import ApiError, FieldError, documented
from gateway.reasoning.router import SSE_HEADERS
from gateway.tasks import protocol as api
from gateway.tasks.serving import Tasks

router = APIRouter(tags=["tasks"])
ERRORS = documented(400, 401, 404, 413, 429, 502, 503, 504)


def _tasks(request: Request) -> Tasks:
    return request.app.state.mesh.tasks


def task_deadline(request: Request, deadline_s: float) -> Deadline:
    """The request's deadline: the header's, else the task's own ``deadline_s``."""
    return parse_timeout(request.headers.get(TIMEOUT_HEADER), int(deadline_s * 1000))


@router.get("/v1/tasks", response_model=api.TaskList, responses=documented(400, 401, 404, 503, 504))
async def list_tasks(request: Request):
    """Every declared task with its input, output and result schemas, route, sampling, deadline and cache."""
    return _tasks(request).listing()


@router.post("/v1/tasks/{name}:stream", responses={**ERRORS, **api.STREAM.doc()})
async def run_task_stream(name: str, body: api.TaskRequest, request: Request):
    """The run as server-sent events, in this order (declared before `/v1/tasks/{name}`, which would match it).

    1. `delta`: `{"text"}`, the output's JSON as the model writes it (none when cached).
    2. `retry`: `{"attempt": 2, "error"}` when the first output broke the schema (its deltas are void).
    3. `done`: the whole TaskResponse, validated; or `error` (the ErrorBody shape).
    """
    tasks = _tasks(request)
    dl = task_deadline(request, tasks.get(name).spec.deadline_s)
    await read_files(request, body, dl)
    run = await tasks.prepare(name, body)  # bad input is a plain HTTP error
    return StreamingResponse(tasks.events(run, dl), media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/v1/tasks/{name}", response_model=api.TaskResponse, responses=ERRORS)
async def run_task(name: str, body: api.TaskRequest, request: Request):
    """Run one task and return its validated result.

    Its input is validated (400 naming `input.<field>`), its output held to and checked against
    `output_schema` (once more with the error when it breaks it, then 502 `invalid_output`), then its post
    step runs; `cached: true` when the response cache answered.
    """
    tasks = _tasks(request)
    dl = task_deadline(request, tasks.get(name).spec.deadline_s)
    await read_files(request, body, dl)
    run = await tasks.prepare(name, body)
    return await tasks.run(run, dl)


async def read_files(request: Request, body: api.TaskRequest, dl: Deadline) -> None:
    """Fill the input fields ``body.files`` names with the files' text (400 naming ``files.<field>``)."""
    if not body.files:
        return
    files = request.app.state.mesh.files
    if files is None:
        raise ApiError(503, "unavailable", "reading files needs the OCR service (--ocr-target)", retryable=True)
    for field, ref in body.files.items():
        if field in body.input:
            why = f"{field} is given both as input and as a file"
            raise ApiError(400, "invalid_argument", why, fields=[FieldError(field=f"files.{field}", description=why)])
        try:
            read = await files.read(await decode(ref.content_base64, f"files.{field}.content_base64"),
                                    FileIn(content_base64="-", filename=ref.filename), dl)
        except ApiError as err:
            for f in err.body.error.fields:
                f.field = f.field.replace("file", f"files.{field}", 1) if f.field == "file" else f.field
            raise
        body.input[field] = read.text
