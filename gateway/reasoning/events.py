"""What every LLM feature answers with: usage, SSE framing, error events and cards (no HTTP but the framing)."""

from __future__ import annotations

from clients.reasoning import Reason, Usage
from gateway.http.telemetry import note
from gateway.reasoning import protocol as api
from gateway.search.protocol import SearchResponse
from gateway.usage.accounting import record


def usage_of(u: Usage) -> api.LlmUsage:
    """Usage -> REST (and its figures into the request's access line and span), counted for the caller."""
    note(ttft_ms=round(u.ttft_ns / 1e6, 2), tokens_in=u.prompt_tokens, tokens_out=u.completion_tokens,
         llm_backend=u.backend, llm_instance=u.instance, tokens_estimated=u.estimated)
    return counted(u)


def counted(u: Usage) -> api.LlmUsage:
    """Usage -> REST, counted for the caller (a call the response does not show: a rewrite, derived queries)."""
    out = api.LlmUsage(llm_calls=u.llm_calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                       ttft_ms=round(u.ttft_ns / 1e6, 2), total_ms=round(u.total_ns / 1e6, 2),
                       tokens_per_second=round(u.tokens_per_second, 2), cost_usd=u.cost_usd, backend=u.backend,
                       model=u.model, estimated=u.estimated, instance=u.instance,
                       cached_prompt_tokens=u.cached_prompt_tokens)
    record(out)  # the request's usage per key, route and model (gateway/usage/accounting.py)
    return out


def card_list(found: SearchResponse, reasons: dict[str, Reason]) -> list[api.Card]:
    """Search hits as cards, with their reasons where there are some (a failed card has no text)."""
    out = []
    for h in found.hits:
        r = reasons.get(h.id)
        out.append(api.Card(id=h.id, score=h.score, text=h.text, payload=h.payload,
                            reason_short=r.short or None if r else None, reason_long=r.long or None if r else None,
                            reason_status=r.status if r else None, reason_violations=list(r.violations) if r else [],
                            reason_source=(r.source or "model") if r and r.short else None))
    return out


def reason_data(r: Reason) -> api.ReasonEvent:
    """One card's reason as the SSE ``reason`` event's data (and an entry of ``reasons``)."""
    return api.ReasonEvent(id=r.item_id, short=r.short, long=r.long, status=r.status,  # type: ignore[arg-type]
                           violations=list(r.violations), source=(r.source or "model") if r.short else None)
