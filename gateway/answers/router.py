"""``POST /v1/answers`` (JSON) and ``POST /v1/answers:stream`` (SSE)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gateway.answers import protocol as api
from gateway.answers.serving import Answers
from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.reasoning.router import sse_response

router = APIRouter(tags=["answers"])
ERRORS = documented(400, 401, 404, 409, 413, 429, 502, 503, 504, described=False)


def _answers(request: Request) -> Answers:
    return request.app.state.mesh.answers


@router.post("/v1/answers", response_model=api.AnswerResponse, responses=ERRORS)
async def answer(body: api.AnswerRequest, request: Request, dl: Deadline = deadline.LLM):
    """A question answered from the collection's documents only, each citation a sentence that holds it.

    With `history`, the question is first rewritten into a standalone one (`rewrite`; on failure the
    turn is searched as written, `rewrite.status: failed`). `answerable: false` (and an empty
    `answer`) when no document clears the similarity floor, the passages do not hold the answer, or
    the sentences the model named do not hold its answer or cover the question (`unsupported`).
    """
    out = await _answers(request).answer(body, dl)
    return JSONResponse(out.model_dump(), headers={"X-Mesh-Degraded": "1" if out.degraded else "0"})


@router.post("/v1/answers:stream", responses={**ERRORS, **api.STREAM.doc()})
async def answer_stream(body: api.AnswerRequest, request: Request, dl: Deadline = deadline.LLM):
    """The answer as server-sent events, in this order.

    1. `passages`: `{"query", "rewrite", "search_mode", "degraded", "passages": [{"n", "id", "start",
       "end", "text"}]}` once the search is done (before the LLM starts).
    2. `delta`: `{"text"}`, the whole answer, sent only once it passed the support checks (none when
       not answerable: an unsupported answer is never shown).
    3. `done`: the whole AnswerResponse, evidence checked; or `error` (the ErrorBody shape).
    """
    answers = _answers(request)
    prepared = await answers.prepare(body, dl)  # bad input and search errors are plain HTTP errors
    return sse_response(answers.events(prepared, dl))
