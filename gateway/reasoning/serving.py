"""Recommendations, chat and summaries over the reasoning instances (no HTTP here but the SSE framing).

Everything crosses to the reasoning service through :mod:`clients.reasoning`'s domain types.

A session id is routed to one reasoning instance by consistent hashing with bounded loads, so the
engine behind it keeps the conversation's prefix cached. Every SSE stream ends with an explicit
``done`` or ``error`` event; a client that disconnects cancels the gRPC call, which cancels the
LLM request behind it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator

from clients.errors import InvalidArgument, MeshClientError
from clients.reasoning import (
    AsyncReasoningClient,
    Delta,
    Done,
    GenerationEvent,
    Item,
    Message,
    Options,
    Reason,
    Reasons,
    Timeouts,
    Usage,
)
from gateway.config import GatewaySettings
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, from_client_error
from gateway.http.telemetry import note
from gateway.reasoning import protocol as api
from gateway.reasoning.routing import BoundedLoadRing
from gateway.search.protocol import SearchRequest, SearchResponse
from gateway.search.serving import Search


def usage_of(u: Usage) -> api.LlmUsage:
    """Usage -> REST (and its figures into the request's access line and span)."""
    note(ttft_ms=round(u.ttft_ns / 1e6, 2), tokens_in=u.prompt_tokens, tokens_out=u.completion_tokens,
         llm_backend=u.backend, llm_instance=u.instance, tokens_estimated=u.estimated)
    return api.LlmUsage(llm_calls=u.llm_calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                        ttft_ms=round(u.ttft_ns / 1e6, 2), total_ms=round(u.total_ns / 1e6, 2),
                        tokens_per_second=round(u.tokens_per_second, 2), cost_usd=u.cost_usd, backend=u.backend,
                        model=u.model, estimated=u.estimated, instance=u.instance)


def sse(event: str, data: dict) -> bytes:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def error_event(err: ApiError | MeshClientError) -> bytes:
    """An ``error`` event with the ErrorBody shape every route uses."""
    api_err = err if isinstance(err, ApiError) else from_client_error(err)
    return sse("error", api_err.body.model_dump())


def card_list(found: SearchResponse, reasons: dict[str, Reason]) -> list[api.Card]:
    """Search hits as cards, with their reasons where there are some (a failed card has no text)."""
    out = []
    for h in found.hits:
        r = reasons.get(h.id)
        out.append(api.Card(id=h.id, score=h.score, text=h.text, payload=h.payload,
                            reason_short=r.short or None if r else None, reason_long=r.long or None if r else None,
                            reason_status=r.status if r else None, reason_violations=list(r.violations) if r else []))
    return out


def reason_data(r: Reason) -> dict:
    """One card's reason as the SSE ``reason`` event's data (and an entry of ``reasons``)."""
    return {"id": r.item_id, "short": r.short, "long": r.long, "status": r.status, "violations": list(r.violations)}


class ChatStream:
    """One chat turn's events as SSE bytes; the ring slot and the RPC are released exactly once."""

    def __init__(self, ring: BoundedLoadRing, target: str, stream: AsyncGenerator[GenerationEvent, None]) -> None:
        self.ring, self.target, self.stream = ring, target, stream
        self._released = False
        self._first: GenerationEvent | None = None

    async def start(self) -> ChatStream:
        """Wait for the first event: bad input and unreachable services fail here, before any byte is sent."""
        try:
            self._first = await anext(self.stream)
        except MeshClientError:
            await self.release()
            raise
        except StopAsyncIteration:
            await self.release()
            raise ApiError(503, "unavailable", "the reasoning stream ended without an event", retryable=True) from None
        return self

    async def release(self) -> None:
        """Close the RPC and free the ring slot (idempotent; also runs when the body never starts)."""
        if not self._released:
            self._released = True
            await self.stream.aclose()
            self.ring.release(self.target)

    async def events(self) -> AsyncIterator[bytes]:
        """``delta`` events, then ``done`` or ``error``."""
        try:
            event = self._first
            while event is not None:
                if isinstance(event, Delta):
                    yield sse("delta", {"text": event.text})
                elif isinstance(event, Done):
                    yield sse("done", {"finish_reason": event.finish_reason,
                                       "usage": usage_of(event.usage).model_dump()})
                    return
                else:
                    yield error_event(ApiError(504 if event.kind.endswith("timeout") else 503, event.kind,
                                               event.message, retryable=True))
                    return
                event = await anext(self.stream, None)
            yield error_event(ApiError(503, "unavailable", "stream ended without done", retryable=True))
        except MeshClientError as err:
            yield error_event(err)
        finally:
            await self.release()


class Reasoning:
    """Clients of every reasoning instance, the session ring over them, and the LLM features."""

    def __init__(self, settings: GatewaySettings, search: Search) -> None:
        targets = [t.strip() for t in settings.reasoning_targets.split(",") if t.strip()]
        self.clients = {t: AsyncReasoningClient(t) for t in targets}
        self.ring = BoundedLoadRing(targets, epsilon=settings.reasoning_load_epsilon)
        self.settings = settings
        self.search = search

    def timeouts(self, deadline: Deadline) -> Timeouts:
        """The stage deadlines of a call, bounded by what is left of the request's deadline."""
        left = deadline.check()
        s = self.settings
        return Timeouts(first_token_s=min(s.reasoning_first_token_s, left),
                        generation_s=min(s.reasoning_generation_s, left), total_s=min(s.reasoning_total_s, left))

    async def cards(self, body: api.RecommendRequest, deadline: Deadline) -> SearchResponse:
        """The search behind a recommendation."""
        return await self.search.search(SearchRequest(collection=body.collection, query=body.query, top_k=body.top_k,
                                                      filter=body.filter), deadline)

    @staticmethod
    def items(found: SearchResponse) -> list[Item]:
        """The search hits as items to explain (title and a payload digest, each capped)."""
        return [Item(id=h.id, title=h.text[:300], description=", ".join(
            f"{k}: {v}" for k, v in h.payload.items() if isinstance(v, str | int | float))[:300]) for h in found.hits]

    async def reasons(self, body: api.RecommendRequest, found: SearchResponse, deadline: Deadline) -> Reasons:
        """One LLM call for every card's reasons, on the query's (or session's) instance."""
        options = Options(timeouts=self.timeouts(deadline))
        with self.ring.hold(body.session_id or body.query) as target:
            return await self.clients[target].reasons(body.query, self.items(found), options=options,
                                                      timeout_s=deadline.check())

    async def reason_events(self, body: api.RecommendRequest, found: SearchResponse,
                            deadline: Deadline) -> AsyncGenerator[Reason | Usage, None]:
        """Each card's reason as soon as the instance knows it, then the usage (the ring slot held meanwhile)."""
        options = Options(timeouts=self.timeouts(deadline))
        with self.ring.hold(body.session_id or body.query) as target:
            stream = self.clients[target].reasons_stream(body.query, self.items(found), options=options,
                                                         timeout_s=deadline.check())
            try:
                async for event in stream:
                    yield event if isinstance(event, Reason) else event.usage
            finally:
                await stream.aclose()  # cancels the RPC (and the LLM request) when the client left early

    async def recommend(self, body: api.RecommendRequest, deadline: Deadline) -> api.RecommendResponse:
        """Cards, with reasons unless they fail (then ``reasons_status: failed``, never a failed request)."""
        found = await self.cards(body, deadline)
        out = api.RecommendResponse(cards=card_list(found, {}), search_mode=found.mode, degraded=found.degraded,
                                    reasons_status="skipped")
        if not body.reasons or not found.hits:
            return out
        try:
            resp = await self.reasons(body, found, deadline)
        except MeshClientError as err:
            out.reasons_status, out.reasons_error = "failed", f"{err.code.name}: {err.message}"
            return out
        out.cards = card_list(found, {r.item_id: r for r in resp.reasons})
        out.reasons_status, out.usage = "ok", usage_of(resp.usage)
        return out

    async def recommend_events(self, body: api.RecommendRequest, found: SearchResponse,
                               deadline: Deadline) -> AsyncIterator[bytes]:
        """``cards`` at once, one ``reason`` per card as it is known, ``reasons`` (all), ``done``; or ``error``."""
        yield sse("cards", {"cards": [c.model_dump() for c in card_list(found, {})], "search_mode": found.mode,
                            "degraded": found.degraded})
        if not body.reasons or not found.hits:
            yield sse("done", {"reasons_status": "skipped"})
            return
        got: dict[str, Reason] = {}
        usage: Usage | None = None
        events = self.reason_events(body, found, deadline)
        try:
            async for event in events:
                if isinstance(event, Reason):
                    got[event.item_id] = event
                    yield sse("reason", reason_data(event))
                else:
                    usage = event
        except (MeshClientError, ApiError) as err:
            yield error_event(err)
            return
        finally:
            await events.aclose()
        if usage is None:
            yield error_event(ApiError(503, "unavailable", "the reasons stream ended without done", retryable=True))
            return
        yield sse("reasons", {"reasons": [reason_data(got[h.id]) for h in found.hits if h.id in got]})
        yield sse("done", {"reasons_status": "ok", "usage": usage_of(usage).model_dump()})

    async def chat(self, body: api.ChatRequest, deadline: Deadline) -> ChatStream:
        """Open a chat turn on the session's instance; started (first event in hand) or raised."""
        options = Options(max_tokens=body.max_tokens or 0, temperature=body.temperature,
                          timeouts=self.timeouts(deadline))
        history = [Message(m.role, m.content) for m in body.history]
        target = self.ring.acquire(body.session_id)
        stream = self.clients[target].chat(body.message, system=body.system, history=history,
                                           session_id=body.session_id, options=options, timeout_s=deadline.check())
        return await ChatStream(self.ring, target, stream).start()

    async def summarize(self, body: api.SummaryRequest, deadline: Deadline) -> api.SummaryResponse:
        """A summary within the summary deadline, or ``failed`` with an empty summary (bad input is a 400)."""
        key = body.session_id or uuid.uuid5(uuid.NAMESPACE_OID, body.text[:200]).hex
        total = min(self.settings.summary_timeout_s, deadline.check())
        options = Options(timeouts=Timeouts(total_s=total, first_token_s=total, generation_s=total))
        start = time.perf_counter()
        with self.ring.hold(key) as target:
            try:
                resp = await self.clients[target].summarize(body.text, max_sentences=body.max_sentences,
                                                            options=options, timeout_s=total + 1.0)
            except InvalidArgument:
                raise
            except MeshClientError as err:
                return api.SummaryResponse(summary="", failed=True, failure_reason=f"{err.code.name}: {err.message} "
                                           f"after {(time.perf_counter() - start) * 1e3:.0f} ms")
        return api.SummaryResponse(summary=resp.summary, failed=resp.failed, failure_reason=resp.failure_reason or None,
                                   usage=usage_of(resp.usage))

    async def close(self) -> None:
        """Close every channel."""
        for client in self.clients.values():
            await client.close()
