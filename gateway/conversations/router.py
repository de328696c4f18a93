"""``/v1/conversations``: start a conversation over a collection, send its turns, read its profile."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from gateway.conversations import protocol as api
from gateway.conversations.finish import Finish
from gateway.conversations.sessions import TASK, Conversations
from gateway.http.deadline import TIMEOUT_HEADER, parse_timeout
from gateway.http.errors import documented

router = APIRouter(tags=["conversations"])
ERRORS = documented(400, 401, 404, 409, 413, 429, 502, 503, 504)


def _conversations(request: Request) -> Conversations:
    return request.app.state.mesh.conversations


@router.post("/v1/conversations", status_code=201, response_model=api.ConversationState, responses=ERRORS)
async def start_conversation(body: api.StartConversation, request: Request):
    """Start a conversation over `collection`, naming its categories and attribute tags (the profile's vocabulary).

    404 when the collection does not exist.

    State lives in the gateway's Redis (`--redis-url`; without one, in this instance only) for
    `--conversation-ttl-s`, renewed by every turn; the history is never truncated.
    """
    return await _conversations(request).start(body, parse_timeout(request.headers.get(TIMEOUT_HEADER), 10_000))


@router.post("/v1/conversations/{conversation_id}/turns", response_model=api.TurnResponse, responses=ERRORS)
async def conversation_turn(conversation_id: str, body: api.TurnRequest, request: Request):
    """One turn: the model proposes its change (`spec_delta`), code merges the profile, the search it implies runs.

    Budget → a price range and must-have attributes → `must`; excluded categories and forbidden
    attributes → `must_not`; recipient, occasion, wanted categories and keywords → the query (one per
    category when there are several). `notes` says what code kept, ignored or resolved (a turn that
    wants and refuses one thing refuses it).
    """
    conversations = _conversations(request)
    seconds = conversations.tasks.get(TASK).spec.deadline_s + 30  # the extraction, then the search and reasons
    deadline = parse_timeout(request.headers.get(TIMEOUT_HEADER), int(seconds * 1000))
    return await conversations.turn(conversation_id, body, deadline)


@router.get("/v1/conversations/{conversation_id}", response_model=api.ConversationState, responses=ERRORS)
async def get_conversation(conversation_id: str, request: Request):
    """The profile and every turn with its notes."""
    return await _conversations(request).state(conversation_id)


def _finish(request: Request) -> Finish:
    return request.app.state.mesh.finish


@router.post("/v1/conversations/{conversation_id}/turns:stream", responses={**ERRORS, **api.TURN_STREAM.doc()})
async def conversation_turn_stream(conversation_id: str, body: api.TurnRequest, request: Request):
    """A turn, then a short reply asking for what the profile still lacks, as server-sent events.

    `turn`: the same object as `/turns` returns (the profile and search never wait for the reply);
    `delta`: the reply as the response route writes it; `reply`: `{"text", "asked", "error", "ms"}` —
    `asked` is what code found missing (recipient, occasion, budget; the model only phrases it), `text`
    null when the reply was late, failed or named a number or a name outside the profile. A conversation
    that does not exist (or is another key's) is a 404 before the stream; another error before the turn
    is one `error` event.
    """
    conversations = _conversations(request)
    await conversations._load(conversation_id)
    seconds = conversations.tasks.get(TASK).spec.deadline_s + 30 + _finish(request).reply_timeout_s
    deadline = parse_timeout(request.headers.get(TIMEOUT_HEADER), int(seconds * 1000))
    return StreamingResponse(_finish(request).turn_events(conversation_id, body, deadline),
                             media_type="text/event-stream")


@router.post("/v1/conversations/{conversation_id}:confirm", response_model=api.Confirmation, responses=ERRORS)
async def confirm_conversation(conversation_id: str, request: Request):
    """Freeze the profile for the confirm screen: display keywords (code) and a summary (the response model).

    The summary is asked once within `--conversation-summary-timeout-s` (5 s) and kept only when every
    number and name in it is the profile's; otherwise `summary` is null and `summary_error` says why —
    the screen shows the profile and keywords. Confirming again returns the stored confirmation
    (`already: true`); a turn after it is 409 `conversation_confirmed`. 409 `nothing_to_confirm` before any turn.
    """
    finish = _finish(request)
    deadline = parse_timeout(request.headers.get(TIMEOUT_HEADER), int((finish.summary_timeout_s + 5) * 1000))
    return await finish.confirm(conversation_id, deadline)


@router.post("/v1/conversations/{conversation_id}:reopen", response_model=api.Reopened, responses=ERRORS)
async def reopen_conversation(conversation_id: str, request: Request):
    """Open a confirmed conversation again to correct its profile (seed 004): up to 3 more turns, then confirm again.

    The turns merge onto the confirmed profile; a fourth turn is 409 `corrections_used`. Until the new
    confirm, a list job is 409 `not_confirmed` (one queued before the reopen fails with that reason), and
    after it the lists read the new confirmation. Two instances reopening at once: one reopens, the
    other answers `already: true`. At most 3 reopens per conversation (409 `reopen_limit`); 409
    `not_confirmed` for a conversation that was never confirmed.
    """
    return await _conversations(request).reopen(conversation_id)


@router.post("/v1/conversations/{conversation_id}/lists", status_code=202, response_model=api.ListsJob,
             responses=ERRORS)
async def start_lists(conversation_id: str, body: api.ListsRequest, request: Request):
    """Queue the `gift` and `self` lists of a confirmed conversation (a job: poll `GET .../lists/{job_id}`).

    Search sentences from the profile (code: the hard constraints as filters; the model: derived
    queries, bounded), one embedding call for all of them, one search per list with the filters and
    MMR, then one reason call per query for the items it found. 409 `not_confirmed` before the confirm.
    """
    deadline = parse_timeout(request.headers.get(TIMEOUT_HEADER), 10_000)
    return await _finish(request).start_lists(conversation_id, body, deadline)


@router.get("/v1/conversations/{conversation_id}/lists/{job_id}", response_model=api.ListsJob, responses=ERRORS)
async def get_lists(conversation_id: str, job_id: str, request: Request):
    """A list job: its state and progress, and the lists once done."""
    return await _finish(request).lists_job(conversation_id, job_id)
