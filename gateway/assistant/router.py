"""``/v1/assistant``: sessions of the career assistant; each message a streamed turn (search, tools, answer)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.assistant import protocol as api
from gateway.assistant.serving import Assistant
from gateway.http import deadline
from gateway.http.deadline import Deadline
from gateway.http.errors import documented
from gateway.reasoning.router import sse_response

router = APIRouter(tags=["assistant"])
ERRORS = documented(400, 401, 404, 409, 413, 429, 503, 504)


def _assistant(request: Request) -> Assistant:
    return request.app.state.mesh.assistant


@router.post("/v1/assistant/sessions", status_code=201, response_model=api.SessionState, responses=ERRORS)
async def start_session(body: api.StartSession, request: Request, dl: Deadline = deadline.LLM):
    """Start a session: the collections `search` reads, the tools it may call, its system text and model route.

    The tools are fixed at start: `search`, the declared tasks (GET /v1/tasks) and the backend tools of
    `--assistant-tools-file`. The session lives in the sessions store (`--sessions-redis-url`) for
    `--assistant-ttl-s`, renewed by every turn.
    """
    return await _assistant(request).start(body, dl)


@router.get("/v1/assistant/sessions/{session_id}", response_model=api.SessionState, responses=ERRORS)
async def get_session(session_id: str, request: Request):
    """The session and its latest turns: what was said, the tool called with its arguments, the reply."""
    return await _assistant(request).state(session_id)


@router.post("/v1/assistant/sessions/{session_id}/messages", responses={**ERRORS, **api.STREAM.doc()})
async def send_message(session_id: str, body: api.Message, request: Request, dl: Deadline = deadline.LLM):
    """One turn, as server-sent events in this order.

    1. `delta` `{"text"}`: the model's reply when it calls no tool (streamed: it needs no check); or
    2. `tool_call` `{"name", "arguments"}` (arguments checked), `tool_result` `{"name", "summary", "cached"}`,
       then for `search` one `answer` `{"text", "answerable", "reason", "citations"}` — the grounded-answer
       checks of /v1/answers, never streamed before them — and for any other tool the model's reply from
       its result as `delta`s;
    3. `done` `{"turn", "tool", "usage", "timings"}`, or `error` (the ErrorBody shape), which ends the turn.
    """
    assistant = _assistant(request)
    session = await assistant.session(session_id)  # an unknown session is a plain 404, before any event
    return sse_response(assistant.turn(session_id, session, body, dl))
