"""Conversations turned into searches (seeds 000 and 004): one turn → a proposed change → a profile → a search.

Each turn runs the ``spec_delta`` task (the model proposes what the turn adds, changes or removes),
then :func:`gateway.conversations.profile.merge` keeps the profile by code, then
:func:`~gateway.conversations.query.search_of` turns it into the search that runs (hard constraints
as filters, the rest as the query), with reasons on request.

State: one Redis hash per conversation (``conversation:<id>``, TTL ``ttl_s`` renewed by each write):
``meta`` and ``t:<n>`` (each turn's text, the model's proposal, the notes and the profile after it),
never truncated. A turn claims its number with HSETNX, so two instances answering two turns of one
conversation at once never lose one: the later claim merges its proposal onto the profile the
earlier turn left. No turn text reaches a log line or a span.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import numpy as np
from prometheus_client import Counter

from clients.errors import MeshClientError
from gateway.access.context import owner, require_read
from gateway.conversations import protocol as api
from gateway.conversations.profile import empty_profile, merge
from gateway.conversations.query import Fields, search_of
from gateway.conversations.reading import Vocabulary
from gateway.conversations.related import nearest, to_relate
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, from_client_error
from gateway.reasoning.events import card_list
from gateway.reasoning.protocol import RecommendRequest
from gateway.reasoning.recommendations import Recommendations
from gateway.search.protocol import SearchRequest
from gateway.search.serving import Search
from gateway.tasks.protocol import TaskRequest
from gateway.tasks.serving import Tasks
from gateway.tasks.store import KeyValue, StoreUnavailable, numbered, session_hash

TASK = "spec_delta"
TURNS = Counter("mesh_gateway_conversation_turns", "conversation turns by outcome", ["outcome"])
for _outcome in ("ok", "failed"):
    TURNS.labels(_outcome)


def unavailable(err: Exception) -> ApiError:
    """The conversation store did not answer: the turn fails (a profile is never guessed)."""
    return ApiError(503, "unavailable", f"the conversation store did not answer ({err})", retryable=True)


def public(profile: dict[str, Any]) -> api.Profile:
    """The profile as returned (without the bookkeeping of the last mention)."""
    return api.Profile(**{k: v for k, v in profile.items() if k in api.Profile.model_fields})


CONFIRMED = "confirmed"  # the hash field a confirm writes: the frozen profile (gateway/conversations/finish.py)
REOPENED = "reopened:"  # reopened:<k>: the confirmation a reopen set aside (the k-th reopen)
CORRECTIONS = 3  # turns a reopened conversation takes before it must be confirmed again (seed 004: up to three)
MAX_REOPENS = 3


def reopenings(fields: dict[str, str]) -> dict[int, dict]:
    """The confirmations set aside by reopens, by their number."""
    return numbered(fields, REOPENED)


class Conversations:
    """``/v1/conversations``: turns on the task runner, the profile by code, the search it implies."""

    def __init__(self, tasks: Tasks, search: Search, recommendations: Recommendations, store: KeyValue, *,
                 ttl_s: int, max_turns: int = 50) -> None:
        self.tasks = tasks
        self.search = search
        self.recommendations = recommendations
        self.store = store
        self.ttl_s = ttl_s
        self.max_turns = max_turns  # the latest turns kept; each turn reads the whole hash, so it stays bounded

    @staticmethod
    def key(cid: str) -> str:
        """The conversation's hash."""
        return f"conversation:{cid}"

    async def _fields(self, cid: str) -> dict[str, str]:
        """The conversation's hash (404 when it does not exist, expired, or is another key's)."""
        try:
            fields = await session_hash(self.store, self.key(cid), cid)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        if not fields or "meta" not in fields:
            raise ApiError(404, "conversation_not_found", "no such conversation (it may have expired)")
        return fields

    async def _load(self, cid: str, *, open_only: bool = False) -> tuple[dict, dict[int, dict]]:
        """Meta and turns; ``open_only``: 409 ``conversation_confirmed`` once the profile is confirmed."""
        fields = await self._fields(cid)
        if open_only and CONFIRMED in fields:
            raise ApiError(409, "conversation_confirmed", "the profile is confirmed: reopen it to correct it "
                                                          "(POST /v1/conversations/{id}:reopen)")
        turns = numbered(fields)
        reopened = reopenings(fields)
        if open_only and reopened and max(turns, default=0) >= reopened[max(reopened)]["turn"] + CORRECTIONS:
            raise ApiError(409, "corrections_used", f"{CORRECTIONS} correction turns were taken since the reopen: "
                                                    "confirm the profile again")
        return json.loads(fields["meta"]), turns

    async def reopen(self, cid: str) -> api.Reopened:
        """Open a confirmed conversation again for up to ``CORRECTIONS`` turns (409 ``not_confirmed`` before a confirm).

        The confirmation moves aside (``reopened:<k>``) in one atomic step, so of two instances reopening at
        once one moves it and the other answers ``already``; the lists job then refuses until it is confirmed
        again, and reads that newer confirmation.
        """
        for _ in range(3):
            fields = await self._fields(cid)
            reopened = reopenings(fields)
            turns = numbered(fields)
            if CONFIRMED not in fields:
                if not reopened:
                    raise ApiError(409, "not_confirmed", "the conversation is open: only a confirmed one is reopened")
                last = reopened[max(reopened)]
                return api.Reopened(id=cid, profile=public(last["profile"]), confirmed_turn=last["turn"],
                                    corrections_left=max(0, last["turn"] + CORRECTIONS - max(turns, default=0)),
                                    reopened=max(reopened), already=True)
            k = max(reopened, default=0) + 1
            if k > MAX_REOPENS:
                raise ApiError(409, "reopen_limit", f"reopened {MAX_REOPENS} times already: start a new conversation")
            try:
                moved = await self.store.hmove(self.key(cid), CONFIRMED, f"{REOPENED}{k}", self.ttl_s)
            except StoreUnavailable as err:
                raise unavailable(err) from None
            if moved:
                record = json.loads(fields[CONFIRMED])
                return api.Reopened(id=cid, profile=public(record["profile"]), confirmed_turn=record["turn"],
                                    corrections_left=CORRECTIONS, reopened=k, already=False)
        raise ApiError(409, "conversation_changed", "the conversation changed during the reopen; send it again",
                       retryable=True)

    async def _expires(self, cid: str) -> int:
        try:
            return await self.store.ttl(self.key(cid))
        except StoreUnavailable:
            return self.ttl_s

    async def start(self, body: api.StartConversation, deadline: Deadline) -> api.ConversationState:
        """A new conversation with an empty profile (404 for a collection that does not exist)."""
        require_read(body.collection)
        try:
            await self.search.retrieval.get_collection(body.collection, timeout_s=deadline.check())
        except MeshClientError as err:
            raise from_client_error(err) from None
        cid = uuid.uuid4().hex
        meta = {**body.model_dump(), "owner": owner()}
        try:
            await self.store.hsetnx(self.key(cid), "meta", json.dumps(meta, ensure_ascii=False), self.ttl_s)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        return api.ConversationState(id=cid, collection=body.collection, profile=public(empty_profile()), turns=[],
                                     expires_in_s=self.ttl_s)

    async def state(self, cid: str) -> api.ConversationState:
        """The profile and every turn."""
        meta, turns = await self._load(cid)
        profile = turns[max(turns)]["profile"] if turns else empty_profile()
        return api.ConversationState(
            id=cid, collection=meta["collection"], profile=public(profile),
            turns=[api.Turn(text=turns[n]["text"], notes=turns[n]["notes"]) for n in sorted(turns)],
            earlier_turns=min(turns) - 1 if turns else 0, expires_in_s=await self._expires(cid))

    async def _related(self, text: str, delta: dict[str, Any], vocab: Vocabulary,
                       deadline: Deadline) -> dict[str, list[tuple[str, str]]]:
        """The vocabulary entry nearest (by embedding) to each word a refused description brings, if near enough.

        See :func:`~gateway.conversations.related.to_relate`; none when the embedding service does not answer.
        """
        words = to_relate(text, delta, vocab)
        if not words:
            return {}
        entries = [("category", c) for c in vocab.categories] + [("attribute", a) for a in vocab.attributes]
        try:
            vectors, _ = await self.search.vectors.query_vectors([*words, *(v for _, v in entries)], deadline)
        except (ApiError, MeshClientError):
            return {}  # the turn still reads what it writes; the description is kept out of the query
        if len(vectors) != len(words) + len(entries):
            return {}
        table = np.stack(vectors[len(words):])
        return {w: nearest([float(x) for x in table @ vectors[i]], entries) for i, w in enumerate(words)}

    async def turn(self, cid: str, body: api.TurnRequest, deadline: Deadline) -> api.TurnResponse:
        """Extract the turn's change, merge the profile, search; the updated profile, the search and the hits."""
        t0 = time.perf_counter()
        meta, turns = await self._load(cid, open_only=True)
        vocab = Vocabulary(tuple(meta["categories"]), tuple(meta["attributes"]))
        previous = turns[max(turns)]["text"] if turns else ""
        request = TaskRequest(input={"text": body.text, "previous": previous, "categories": meta["categories"],
                                     "attributes": meta["attributes"]}, model=meta.get("model"), session_id=cid)
        try:
            run = await self.tasks.prepare(TASK, request)
            extracted = await self.tasks.run(run, deadline)
        except ApiError:
            TURNS.labels("failed").inc()
            raise
        extraction_ms = (time.perf_counter() - t0) * 1e3
        delta = extracted.result
        related = await self._related(body.text, delta, vocab, deadline)
        search_ms = 0.0
        for _ in range(5):  # a turn claimed by another request meanwhile: merge onto the profile it left
            n = max(turns, default=0) + 1
            before = turns[n - 1]["profile"] if n > 1 else empty_profile()
            merged = merge(before, delta, body.text, vocab, related)
            spec = search_of(merged.profile, Fields(**meta["fields"]), body.top_k)
            t1 = time.perf_counter()  # searched before the turn is recorded: a failed turn records nothing
            found = await self.search.search(SearchRequest(collection=meta["collection"], **spec), deadline)
            search_ms += (time.perf_counter() - t1) * 1e3
            record = {"text": body.text, "proposed": delta, "notes": merged.notes, "profile": merged.profile}
            try:  # one atomic write: the turn, unless a confirm froze the profile meanwhile (then 409)
                written = await self.store.hsetnx_unless(self.key(cid), f"t:{n}",
                                                         json.dumps(record, ensure_ascii=False), self.ttl_s, CONFIRMED)
                if written is None:
                    raise ApiError(409, "conversation_confirmed", "the profile was confirmed while this turn ran: "
                                                                  "start a new conversation to change it")
                if written:
                    if n > self.max_turns:  # the oldest kept turn goes; the profile carries what it said
                        await self.store.hdel(self.key(cid), f"t:{n - self.max_turns}")
                    break
            except StoreUnavailable as err:
                raise unavailable(err) from None
            meta, turns = await self._load(cid, open_only=True)
        else:
            raise ApiError(409, "turn_conflict", "the conversation changed five times during this turn; send it again",
                           retryable=True)
        cards, status = card_list(found, {}), "skipped"
        if body.reasons and found.hits:
            query = spec.get("query") or " / ".join(spec["queries"])
            ask = RecommendRequest(collection=meta["collection"], query=query[:500], top_k=min(body.top_k, 20),
                                   session_id=cid)
            try:
                reasons = await self.recommendations.reasons(ask, found, deadline)
                cards, status = card_list(found, {r.item_id: r for r in reasons.reasons}), "ok"
            except MeshClientError:
                status = "failed"
        TURNS.labels("ok").inc()
        return api.TurnResponse(
            id=cid, turn=n, profile=public(merged.profile), notes=merged.notes, proposed=delta,
            search=api.TurnSearch(query=spec.get("query"), queries=spec.get("queries"), filter=spec.get("filter")),
            hits=cards, search_mode=found.mode, degraded=found.degraded, reasons_status=status,
            usage=extracted.usage,
            timings=api.TurnTimings(extraction_ms=round(extraction_ms, 2), search_ms=round(search_ms, 2),
                                    total_ms=round((time.perf_counter() - t0) * 1e3, 2)))

