"""Recommendations: search, then one LLM call for every card's reasons (JSON, or SSE as each reason is known)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from clients.errors import MeshClientError
from clients.reasoning import Item, Options, Reason, Reasons, Usage
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.reasoning import protocol as api
from gateway.reasoning.events import card_list, reason_data, usage_of
from gateway.reasoning.pool import ReasoningPool
from gateway.search.protocol import SearchRequest, SearchResponse
from gateway.search.serving import Search


class Recommendations:
    """Cards from search, with reasons from the query's (or session's) reasoning instance."""

    def __init__(self, search: Search, pool: ReasoningPool) -> None:
        self.search = search
        self.pool = pool

    async def cards(self, body: api.RecommendRequest, deadline: Deadline) -> SearchResponse:
        """The search behind a recommendation."""
        return await self.search.search(SearchRequest(collection=body.collection, query=body.query, top_k=body.top_k,
                                                      filter=body.filter, expand=body.expand), deadline)

    @staticmethod
    def items(found: SearchResponse) -> list[Item]:
        """The search hits as items to explain (title and a payload digest, each capped).

        A list value (tags, attributes) is one field with its values joined by "/": the model reads the
        item's attributes, and the rule-written reason names those the query asks for (issue 81).
        """
        return [Item(id=h.id, title=h.text[:300], description=", ".join(
            f"{k}: {v}" if isinstance(v, str | int | float) else f"{k}: {'/'.join(str(x) for x in v)}"
            for k, v in h.payload.items()
            if isinstance(v, str | int | float) or isinstance(v, list) and all(isinstance(x, str | int) for x in v)
        )[:300]) for h in found.hits]

    async def reasons(self, body: api.RecommendRequest, found: SearchResponse, deadline: Deadline) -> Reasons:
        """One LLM call for every card's reasons, on the query's (or session's) instance."""
        options = Options(timeouts=self.pool.timeouts(deadline), model=self.pool.model)
        with self.pool.hold(body.session_id or body.query) as client:
            return await client.reasons(body.query, self.items(found), options=options,
                                                      timeout_s=deadline.check())

    async def reason_events(self, body: api.RecommendRequest, found: SearchResponse,
                            deadline: Deadline) -> AsyncGenerator[Reason | Usage, None]:
        """Each card's reason as soon as the instance knows it, then the usage (the ring slot held meanwhile)."""
        options = Options(timeouts=self.pool.timeouts(deadline), model=self.pool.model)
        with self.pool.hold(body.session_id or body.query) as client:
            stream = client.reasons_stream(body.query, self.items(found), options=options,
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
                                    reasons_status="skipped", expansion=found.expansion,
                                    queries=[q.query for q in found.queries] if found.queries else None)
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
                               deadline: Deadline) -> AsyncGenerator[bytes, None]:
        """``cards`` at once, one ``reason`` per card as it is known, ``reasons`` (all), ``done``; or ``error``."""
        send = api.RECOMMEND_STREAM.send
        yield send("cards", api.CardsEvent(cards=card_list(found, {}), search_mode=found.mode, degraded=found.degraded,
                                           expansion=found.expansion,
                                           queries=[q.query for q in found.queries or []] if found.expansion else None))
        if not body.reasons or not found.hits:
            yield send("done", api.RecommendDone(reasons_status="skipped"))
            return
        got: dict[str, Reason] = {}
        usage: Usage | None = None
        events = self.reason_events(body, found, deadline)
        try:
            async for event in events:
                if isinstance(event, Reason):
                    got[event.item_id] = event
                    yield send("reason", reason_data(event))
                else:
                    usage = event
        except (MeshClientError, ApiError) as err:
            yield api.RECOMMEND_STREAM.error(err)
            return
        finally:
            await events.aclose()
        if usage is None:
            yield api.RECOMMEND_STREAM.error(ApiError(503, "unavailable", "the reasons stream ended without done",
                                                      retryable=True))
            return
        yield send("reasons", api.ReasonsEvent(reasons=[reason_data(got[h.id]) for h in found.hits if h.id in got]))
        yield send("done", api.RecommendDone(reasons_status="ok", usage=usage_of(usage)))
