"""``/v1/conversations``: start a conversation over a collection, send its turns, read its profile."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.conversations import protocol as api
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
