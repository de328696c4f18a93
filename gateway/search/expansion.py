"""Derived queries: one schema-constrained LLM call rewrites a request into other wordings of the same need.

The original query is always searched (first); the derived ones are added when the call gives them
in time. A failure (deadline, the LLM down, nothing new) is never a failed search: the query is
searched alone and the response says why (``expansion.status: failed``).
"""

from __future__ import annotations

import math
import time

from prometheus_client import Counter

from clients.reasoning import ChatMessage
from gateway.http.admission import Slots
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError
from gateway.reasoning.routes import ModelRoutes
from gateway.reasoning.structured import StructuredFailed, structured
from gateway.search import protocol as api
from gateway.usage.accounting import admit_llm

EXPANSIONS = Counter("mesh_gateway_query_expansions", "derived-query requests by outcome", ["outcome"])
for _outcome in ("ok", "failed"):
    EXPANSIONS.labels(_outcome)

SYSTEM = ("당신은 검색 질의를 다시 쓰는 도우미입니다. 사용자의 검색 요청과 같은 것을 찾되 다른 낱말과 다른 "
          "표현으로 쓴 검색 질의를 만드세요. 각 질의는 40자 이내로 짧게 쓰고, 원래 요청의 조건(가격, 대상, 종류, "
          "기간)은 바꾸지 마세요.")


def schema(k: int) -> dict:
    """Exactly ``k`` short query strings."""
    return {"type": "object", "additionalProperties": False, "required": ["queries"],
            "properties": {"queries": {"type": "array", "minItems": k, "maxItems": k,
                                       "items": {"type": "string"}}}}


class QueryExpander:
    """Derived queries on a model route, within their own deadline."""

    def __init__(self, routes: ModelRoutes, route: str, timeout_s: float, slots: Slots | None = None,
                 min_s: float = 0.0) -> None:
        self.routes = routes
        self.route = route
        self.timeout_s = timeout_s
        self.min_s = min_s  # less than this for the LLM call: refused up front (400), not run to fail
        # Derived queries are LLM calls: they take a slot of the one LLM cap (--max-inflight-llm), shared
        # with every LLM route. With none free the search never waits: the query runs alone.
        self.slots = slots or Slots("llm", 0)

    async def derive(self, query: str, choice: api.ExpandChoice,
                     deadline: Deadline) -> tuple[list[str], api.Expansion]:
        """Up to ``choice.n - 1`` new queries (distinct from the query and each other) and what happened."""
        start = time.perf_counter()
        route = self.routes.get(choice.model or self.route)  # an unknown route is a 404, as on every LLM route
        await admit_llm()  # the caller's quota, before the LLM (429 when used up); its tokens are counted to it
        want = choice.n - 1
        messages = [ChatMessage("system", SYSTEM),
                    ChatMessage("user", f"검색 요청: {query}\n같은 것을 찾는 다른 표현의 검색 질의 {want}개를 주세요.")]
        total = min(self.timeout_s, deadline.check() * 0.5)  # half the request's time at most: the search needs some
        if total < self.min_s:
            need_ms = math.ceil((self.min_s * 2 + 0.25) * 1000)  # a margin for the time spent before this check
            why = (f"derived queries need {self.min_s:g} s of the model and get half of the request's deadline "
                   f"({total:.1f} s here): send X-Request-Timeout-Ms of at least {need_ms}, or search without expand")
            raise ApiError(400, "invalid_argument", why, fields=[FieldError(field="expand", description=why)])

        def outcome(status: str, derived: int, reason: str | None = None) -> api.Expansion:
            EXPANSIONS.labels(status).inc()
            return api.Expansion(status=status, reason=reason, derived=derived,
                                 ms=round((time.perf_counter() - start) * 1e3, 1))

        if not await self.slots.try_acquire():
            return [], outcome("failed", 0, "overloaded")
        try:
            value, _ = await structured(route, messages, schema(want), "derived_queries", key=query,
                                        total_s=total, max_tokens=48 * want)
        except StructuredFailed as err:
            return [], outcome("failed", 0, err.reason)
        finally:
            self.slots.release()
        seen = {api.query_key(query)}
        out: list[str] = []
        for text in value.get("queries", []) if isinstance(value, dict) else []:
            if isinstance(text, str) and text.strip() and api.query_key(text) not in seen and len(text) <= 2000:
                seen.add(api.query_key(text))
                out.append(text.strip())
        if not out:
            return [], outcome("failed", 0, "no_new_query")
        return out[:want], outcome("ok", len(out[:want]))
