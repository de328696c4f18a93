"""A gift conversation's end (seed 004): a reply on each turn, the confirm screen, and the two lists as a job.

- **Reply** (``POST /v1/conversations/{id}/turns:stream``): the turn's profile and search are sent first
  (``turn`` event: they never wait for the reply); then the response route writes one short reply
  asking for what code found missing (:func:`confirm.missing`), streamed as ``delta`` events within its
  own deadline (``--conversation-reply-timeout-s``), and ``reply`` ends it: the text when code's check
  (:func:`confirm.unfaithful`) passes, else ``null`` with the reason. A failed reply fails nothing.
- **Confirm** (``POST /v1/conversations/{id}:confirm``): display keywords by code, a summary by the
  response route within ``--conversation-summary-timeout-s`` (5 s), asked once (no retry, no
  regeneration); a summary that is late, fails or names a number or a name outside the profile is
  ``null`` with ``summary_error``. The profile is frozen: the record is stored with HSETNX, so two
  confirms on two instances return the same one; a later turn is 409 ``conversation_confirmed``.
- **Lists** (``POST /v1/conversations/{id}/lists``, a job of the job store, kind ``lists``): search
  sentences from the confirmed profile — code's (:func:`profile.search_of`: the hard parts as filters)
  and, for the gift list, derived queries from the model (``expand``, bounded, a failure leaves code's
  alone) —, their vectors in one embedding call (the gateway's vector cache, Redis when configured, so
  every search after it and a job resumed on another instance reuse them), one search per list with the
  hard filters and MMR, then one reason call per query for the items that query found (failures
  isolated: a failed call leaves only its own items without a reason). ``gift`` is for the recipient;
  ``self`` is for the person asking (the same constraints and wishes, no recipient or occasion, none of
  the gift list's items). Timings per stage come with the result.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import Any

from prometheus_client import Counter

from clients.errors import MeshClientError
from clients.reasoning import ChatMessage, Delta, Done, Options, Timeouts, Usage
from gateway.access.context import owner, owns
from gateway.conversations import confirm
from gateway.conversations import protocol as api
from gateway.conversations.protocol import LATE
from gateway.conversations.query import Fields, search_of
from gateway.conversations.reading import Vocabulary
from gateway.conversations.reasons import model_reason, rule_reasons
from gateway.conversations.sessions import CONFIRMED, Conversations, unavailable
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, from_client_error, job_submit_error
from gateway.http.streams import TextDelta
from gateway.reasoning.events import usage_of
from gateway.reasoning.routes import ModelRoutes
from gateway.reasoning.structured import StructuredFailed, open_structured
from gateway.search.protocol import ExpandChoice, MmrChoice, SearchRequest, query_key
from gateway.tasks.store import StoreUnavailable
from services.runtime.jobs.base import Jobs
from services.runtime.jobs.records import JobContext, JobNotFound, JobRecord, JobStoreUnavailable, QueueFull

SUMMARIES = Counter("mesh_gateway_conversation_summaries", "confirm summaries by outcome", ["outcome"])
for _outcome in ("ok", "late", "failed", "unfaithful"):
    SUMMARIES.labels(_outcome)

KIND = "lists"
NAMED_DIVERSITY = 0.1  # the MMR diversity of a list whose categories the person named (see _lists)
SELF_WORDS = "나를 위한"


def title(text: str) -> str:
    """An item's short name: its text's first clause."""
    return text.split(",")[0].strip()[:60]


class Finish:
    """Replies, confirmations and list jobs over a conversation store, a response route and the job store."""

    def __init__(self, conversations: Conversations, routes: ModelRoutes, jobs: Jobs, *, route: str,
                 summary_timeout_s: float, reply_timeout_s: float, reason_timeout_s: float) -> None:
        self.conversations = conversations
        self.routes = routes
        self.jobs = jobs
        self.route = route  # the response route (seed 004: the larger model writes what people read)
        self.summary_timeout_s = summary_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self.reason_timeout_s = reason_timeout_s

    def handlers(self) -> dict[str, Any]:
        """The job kinds this feature runs."""
        return {KIND: self._lists}

    # -- shared ------------------------------------------------------------------------------------------

    async def _text(self, messages: list[tuple[confirm.Role, str]], schema: dict, name: str, key: str,
                    total_s: float, max_tokens: int) -> tuple[str | None, str | None, Usage | None]:
        """One call on the response route, asked once: (the field's text, why none, usage)."""
        field = next(iter(schema["properties"]))
        call = None
        try:
            call = await open_structured(self.routes.get(self.route), [ChatMessage(r, t) for r, t in messages],
                                         schema, name, key=key, total_s=total_s, max_tokens=max_tokens)
            async for _ in call.deltas():
                pass
        except StructuredFailed as err:
            return (None, LATE if err.reason.endswith("timeout") or err.reason == LATE else err.reason,
                    call.usage if call is not None else None)  # an answer that broke the schema still cost tokens
        value = call.value.get(field) if isinstance(call.value, dict) else None
        if not isinstance(value, str) or not value.strip():
            return None, "empty", call.usage
        cap = schema["properties"][field].get("maxLength")
        if cap is not None and len(value) >= cap:  # the grammar closed the string at its cap: a sentence cut short
            return None, f"cut at {cap} characters", call.usage
        return value.strip(), None, call.usage

    async def _confirmed(self, cid: str) -> dict | None:
        try:
            raw = (await self.conversations.store.hgetall(self.conversations.key(cid))).get(CONFIRMED)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        return json.loads(raw) if raw else None

    # -- confirm -----------------------------------------------------------------------------------------

    async def confirm(self, cid: str, deadline: Deadline) -> api.Confirmation:
        """Freeze the profile with keywords and a summary (the stored one when already confirmed).

        The freeze and a turn are exclusive: the confirm is written only if no turn came after the one it
        read (one atomic write, ``hsetnx_unless``), and a turn only if no confirm came first. A turn that
        lands while the summary is written makes the confirm start again from it (three times at most,
        then a retryable 409).
        """
        for _ in range(3):
            done = await self._confirm_once(cid, deadline)
            if done is not None:
                return done
        raise ApiError(409, "conversation_changed", "turns kept arriving while the profile was confirmed; confirm "
                                                    "again", retryable=True)

    async def _confirm_once(self, cid: str, deadline: Deadline) -> api.Confirmation | None:
        """One attempt: the confirmation, or None when a turn came after the one it read."""
        meta, turns = await self.conversations._load(cid)
        stored = await self._confirmed(cid)
        if stored is not None:
            return api.Confirmation(**stored, id=cid, already=True)
        if not turns:
            raise ApiError(409, "nothing_to_confirm", "the conversation has no turn yet: nothing to confirm")
        profile = turns[max(turns)]["profile"]
        vocab = Vocabulary(tuple(meta["categories"]), tuple(meta["attributes"]))
        t = time.perf_counter()
        budget = min(self.summary_timeout_s, max(deadline.check() - 0.5, 0.1))
        text, why, usage = await self._text(confirm.summary_messages(profile), confirm.SUMMARY_SCHEMA, "summary",
                                            cid, budget, confirm.SUMMARY_TOKENS)
        summary_ms = (time.perf_counter() - t) * 1e3
        if text is not None:
            problems = confirm.unfaithful(text, profile, vocab)
            if problems:
                text, why = None, "unfaithful: " + "; ".join(problems)
        outcome = "ok" if text else ("late" if why == LATE else
                                     "unfaithful" if why and why.startswith("unfaithful") else "failed")
        SUMMARIES.labels(outcome).inc()
        record = {"turn": max(turns), "profile": {k: v for k, v in profile.items() if k in api.Profile.model_fields},
                  "keywords": confirm.keywords(profile), "summary": text, "summary_error": why,
                  "summary_ms": round(summary_ms, 1), "confirmed_unix_ms": int(time.time() * 1000),
                  "usage": usage_of(usage).model_dump() if usage else None}
        try:  # frozen only if no turn came after the one read (a turn since: start again from it)
            won = await self.conversations.store.hsetnx_unless(self.conversations.key(cid), CONFIRMED,
                                                               json.dumps(record, ensure_ascii=False),
                                                               self.conversations.ttl_s, f"t:{max(turns) + 1}")
        except StoreUnavailable as err:
            raise unavailable(err) from None
        if won is None:
            return None
        if not won:  # another request confirmed it meanwhile: theirs stands
            stored = await self._confirmed(cid)
            return api.Confirmation(**(stored or record), id=cid, already=True)
        return api.Confirmation(**record, id=cid, already=False)

    # -- a reply on each turn ----------------------------------------------------------------------------

    async def turn_events(self, cid: str, body: api.TurnRequest, deadline: Deadline) -> AsyncGenerator[bytes, None]:
        """The turn (``turn``), then the reply as it is written (``delta``), then ``reply`` (or ``error``)."""
        try:
            done = await self.conversations.turn(cid, body, deadline)
        except ApiError as err:
            yield api.TURN_STREAM.error(err)
            return
        yield api.TURN_STREAM.send("turn", done)
        meta, _ = await self.conversations._load(cid)
        vocab = Vocabulary(tuple(meta["categories"]), tuple(meta["attributes"]))
        profile = done.profile.model_dump()
        asked = confirm.missing(profile)
        start = time.perf_counter()
        total = min(self.reply_timeout_s, max(deadline.remaining() - 0.2, 0.1))
        options = Options(max_tokens=64, temperature=0.0, seed=7,
                          timeouts=Timeouts(first_token_s=total, generation_s=total, total_s=total))
        text: list[str] = []
        why: str | None = None
        usage = None
        try:
            route = self.routes.get(self.route)
            target, client = route.pool.acquire(cid)
            try:
                messages = [ChatMessage(r, t) for r, t in confirm.reply_messages(profile, asked, body.text)]
                async for event in client.complete(messages, options=options, model=route.model,
                                                   timeout_s=total + 0.5):
                    if isinstance(event, Delta):
                        text.append(event.text)
                        yield api.TURN_STREAM.send("delta", TextDelta(text=event.text))
                    elif isinstance(event, Done):
                        usage = event.usage
                    else:
                        why = getattr(event, "kind", "failed")
                        break
            finally:
                route.pool.release(target)
        except MeshClientError as err:
            why = err.code.name.lower()
        reply = "".join(text).strip() or None
        if reply is not None and why is None:
            problems = confirm.unfaithful(reply, profile, vocab)
            if problems:
                why = "unfaithful: " + "; ".join(problems)
        if why is not None:
            reply = None
        yield api.TURN_STREAM.send("reply", api.ReplyEvent(text=reply, asked=asked, error=why,
                                                           ms=round((time.perf_counter() - start) * 1e3, 1),
                                                           usage=usage_of(usage) if usage else None))

    # -- lists -------------------------------------------------------------------------------------------

    async def start_lists(self, cid: str, body: api.ListsRequest, deadline: Deadline) -> api.ListsJob:
        """Queue the lists of a confirmed conversation (409 before the confirm)."""
        await self.conversations._load(cid)
        if await self._confirmed(cid) is None:
            raise ApiError(409, "not_confirmed", "confirm the conversation first (POST /v1/conversations/{id}:confirm)")
        payload = json.dumps({"conversation": cid, **body.model_dump()}).encode()
        try:
            record = await self.jobs.submit(KIND, cid, payload, total=4, meta={"owner": owner()})
        except (QueueFull, JobStoreUnavailable) as err:
            raise job_submit_error(err) from None
        return job_view(record)

    async def lists_job(self, cid: str, job_id: str) -> api.ListsJob:
        """A list job of this conversation (404 for another's or an unknown one, or another key's conversation)."""
        await self.conversations._load(cid)
        try:
            record = await self.jobs.get(job_id)
        except JobNotFound:
            record = None
        except JobStoreUnavailable as err:
            raise ApiError(503, "unavailable", str(err), retryable=True) from None
        if record is None or record.kind != KIND or record.subject != cid or not owns(record.meta.get("owner")):
            raise ApiError(404, "job_not_found", "no such list job for this conversation (it may have expired)")
        return job_view(record)

    async def _lists(self, record: JobRecord, payload: bytes, ctx: JobContext) -> dict[str, Any]:
        work = json.loads(payload)
        cid = work["conversation"]
        deadline = Deadline(300.0)
        t0 = time.perf_counter()
        meta, _ = await self.conversations._load(cid)
        stored = await self._confirmed(cid)
        if stored is None:
            await ctx.progress(error="the conversation is not confirmed")
            return {"error": "not confirmed"}
        profile = {**stored["profile"], "excluded_keywords": stored["profile"].get("excluded_keywords", [])}
        vocab = Vocabulary(tuple(meta["categories"]), tuple(meta["attributes"]))
        fields = Fields(**meta["fields"])
        top_k = work["top_k"]
        timings: dict[str, float] = {}

        # 1. search sentences: code's (filters and the query), derived ones for the gift list
        t = time.perf_counter()
        spec = search_of(profile, fields, top_k)
        gift_queries = spec.get("queries") or [spec["query"]]
        expansion = {"status": "skipped", "reason": None, "derived": 0}
        if work["derived"] > 0 and profile["categories"]:
            # The person named what they want: code's query per category carries it, and derived wordings
            # (which drift to the recipient and the occasion) would outvote it in the fusion across queries
            # (bench/results/gift_lists_report3.md: must-have recall 35 % against 75 % for code's queries).
            expansion["reason"] = "categories named: code's queries"
        elif work["derived"] > 0 and self.conversations.search.expander is not None:
            derived, exp = await self.conversations.search.expander.derive(
                gift_queries[0], ExpandChoice(n=work["derived"] + 1), deadline)
            expansion = {"status": exp.status, "reason": exp.reason, "derived": len(derived)}
            seen = {query_key(q) for q in gift_queries}
            gift_queries += [q for q in derived if query_key(q) not in seen][:8 - len(gift_queries)]
        own = [*profile["categories"], *profile["must_have"],
               *(k for k in profile["keywords"] if k not in set(profile.get("excluded_keywords") or []))]
        self_queries = [" ".join([SELF_WORDS, *own[:4], "선물"])]
        timings["queries_ms"] = (time.perf_counter() - t) * 1e3
        await ctx.progress(done=1)

        # 2. every sentence's vector in one embedding call (cached: the searches below read them back)
        t = time.perf_counter()
        try:
            await self.conversations.search.vectors.query_vectors(list(dict.fromkeys(gift_queries + self_queries)),
                                                                  deadline)
        except (ApiError, MeshClientError):
            pass  # the searches embed (or degrade to keyword) themselves
        timings["embed_ms"] = (time.perf_counter() - t) * 1e3
        await ctx.progress(done=2)

        # 3. one search per list: the hard filters, MMR for diversity
        t = time.perf_counter()
        filt = spec.get("filter")
        # Diversity among the near-relevant: the candidates are twice the list, so an off-wish item ranked
        # far down is never picked for being different.
        # When the person named categories, the per-category queries already spread the list across them:
        # diversity on top trades their matches for other items (must-have recall 78.1 % against 86.2 % for
        # the hand-written search on report4, bench/results/gift_lists.md), so it is turned down to a tie-break.
        diversity = min(work["diversity"], NAMED_DIVERSITY) if profile["categories"] else work["diversity"]
        mmr = MmrChoice(diversity=diversity, candidates=2 * top_k) if diversity > 0 else None
        gift = await self._search(meta["collection"], gift_queries, filt, top_k, mmr, deadline)
        taken = {h.id for h in gift.hits}
        mine = await self._search(meta["collection"], self_queries, filt, top_k + len(taken), mmr, deadline)
        mine_hits = [h for h in mine.hits if h.id not in taken][:top_k]
        timings["search_ms"] = (time.perf_counter() - t) * 1e3
        await ctx.progress(done=3)

        # 4. one reason call per query (its own items), failures isolated
        t = time.perf_counter()
        lists = {"gift": self._groups(gift_queries, gift.hits), "self": self._groups(self_queries, mine_hits)}
        if work["reasons"]:
            for name, groups in lists.items():
                for group in groups:
                    if group["items"]:
                        group.update(await self._reason(record.id, name, profile, vocab, group))
                        rule_reasons(profile, fields, group, for_self=name == "self")
        timings["reasons_ms"] = (time.perf_counter() - t) * 1e3
        timings["total_ms"] = (time.perf_counter() - t0) * 1e3
        await ctx.progress(done=4)
        return {"conversation": cid, "expansion": expansion, "degraded": gift.degraded or mine.degraded,
                "gift": self._flatten(lists["gift"]), "self": self._flatten(lists["self"]),
                "queries": {k: [{"query": g["query"], "reason_status": g.get("reason_status", "skipped"),
                                 "reason": g.get("reason"), "reason_error": g.get("reason_error")} for g in v]
                            for k, v in lists.items()},
                "timings": {k: round(v, 1) for k, v in timings.items()}}

    async def _search(self, collection: str, queries: list[str], filt: dict | None, top_k: int,
                      mmr: MmrChoice | None, deadline: Deadline):
        request = SearchRequest(collection=collection, queries=queries, filter=filt, top_k=min(top_k, 100), mmr=mmr)
        try:
            return await self.conversations.search.search(request, deadline)
        except MeshClientError as err:
            raise from_client_error(err) from None

    @staticmethod
    def _groups(queries: list[str], hits: list) -> list[dict[str, Any]]:
        """The hits grouped by the first query that found each (one query alone: all of them)."""
        groups: list[dict[str, Any]] = [{"query": q, "items": []} for q in queries]
        for rank, h in enumerate(hits):
            first = (h.matched_queries or [0])[0] if len(queries) > 1 else 0
            groups[min(first, len(groups) - 1)]["items"].append(
                {"id": h.id, "rank": rank + 1, "score": round(h.score, 4), "title": title(h.text),
                 "title_full": h.text, "payload": h.payload})
        return groups

    @staticmethod
    def _flatten(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items = [{**{k: v for k, v in item.items() if k != "title_full"}, "query": g["query"],
                  "reason": item.get("reason", g.get("reason")), "reason_source": item.get("reason_source")}
                 for g in groups for item in g["items"]]
        return sorted(items, key=lambda i: i["rank"])

    async def _reason(self, job_id: str, name: str, profile: dict, vocab: Vocabulary,
                      group: dict[str, Any]) -> dict[str, Any]:
        """One call for one query's items (gateway/conversations/reasons.py), kept per job in the store."""
        return await model_reason(self._text, self.conversations.store, self.conversations.ttl_s, self.reason_timeout_s,
                                  job_id, name, profile, vocab, group)


def job_view(r: JobRecord) -> api.ListsJob:
    """A list job as returned."""
    return api.ListsJob(id=r.id, conversation=r.subject, state=r.state, done=r.done, total=r.total,
                        errors=r.errors, result=r.result)


