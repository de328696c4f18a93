"""``GET /v1/usage``: what callers spent, per key, route or model, from the hourly counters (90 days)."""

from __future__ import annotations

import calendar
import time
from datetime import UTC, datetime

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from gateway.http.auth import ANONYMOUS
from gateway.http.errors import ApiError, FieldError, documented
from gateway.usage.ledger import METRICS, RETENTION_S, SEP, hour_of

router = APIRouter(tags=["usage"])
ERRORS = documented(400, 401, 404, 503, 504)
GROUPS = {"route": 0, "model": 1}


class UsageRow(BaseModel):
    """One group's totals."""

    group: str = Field(description="the key id, the route template or the model, per `group_by`")
    requests: int = Field(description="requests that used the LLM (per model: a request on two models counts in both)")
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cost_usd: float


class UsageReport(BaseModel):
    """Usage between two hours, grouped."""

    start: str = Field(description="ISO 8601, UTC, the first hour counted")
    end: str = Field(description="ISO 8601, UTC, the hour after the last counted")
    group_by: str
    key: str | None = Field(description="the caller's key id when only its own usage is shown (keys configured)")
    rows: list[UsageRow]
    total: UsageRow


def _moment(raw: str | None, field: str, default: float) -> float:
    if raw is None:
        return default
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, "invalid_argument", f"{field}: not an ISO 8601 date or time", fields=[
            FieldError(field=field, description="an ISO 8601 date or time, e.g. 2026-12-06 or 2026-12-06T09:00Z")
        ]) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


@router.get("/v1/usage", response_model=UsageReport, responses=ERRORS)
async def usage(request: Request, start: str | None = Query(None, alias="from", description="ISO 8601 (default: "
                                                                                              "24 hours ago)"),
                end: str | None = Query(None, alias="to", description="ISO 8601 (default: now)"),
                group_by: str = Query("route", pattern="^(key|route|model)$")) -> UsageReport:
    """LLM usage (requests, tokens, cached prompt tokens, cost) per key, route or model, counted per UTC hour.

    The figures are the sums of the `usage` objects the responses returned, and of the jobs the key
    started (route `job:<kind>`). A caller sees its own key's usage only, read from its own counters
    (operators read every key from Prometheus: `mesh_gateway_llm_tokens_total`); kept 90 days.
    """
    now = time.time()
    t0, t1 = _moment(start, "from", now - 86400), _moment(end, "to", now)
    if t1 <= t0 or t1 - t0 > RETENTION_S:
        raise ApiError(400, "invalid_argument", "from must be before to, at most 90 days apart", fields=[
            FieldError(field="from", description="before `to`, at most 90 days earlier")])
    first = calendar.timegm(time.strptime(hour_of(t0), "%Y%m%d%H"))
    hours = [hour_of(first + 3600 * i) for i in range(int((t1 - first) // 3600) + 1) if first + 3600 * i < t1]
    keys = request.app.state.settings.api_keys.get_secret_value() or request.app.state.settings.api_keys_file
    own = getattr(request.state, "key_id", None) or ANONYMOUS
    try:
        counted = await request.app.state.mesh.ledger.hours(own, hours)  # this key's hashes only
    except Exception as err:  # noqa: BLE001 - the store's own errors
        raise ApiError(503, "unavailable", f"the usage store did not answer ({type(err).__name__})",
                       retryable=True) from None
    sums: dict[str, dict[str, float]] = {}
    for fields in counted.values():
        for name, value in fields.items():
            parts = name.split(SEP)
            if len(parts) != 3:
                continue
            group = own if group_by == "key" else parts[GROUPS[group_by]]
            sums.setdefault(group, dict.fromkeys(METRICS, 0.0))[parts[2]] += value

    def row(group: str, v: dict[str, float]) -> UsageRow:
        return UsageRow(group=group, requests=int(v["requests"]), prompt_tokens=int(v["prompt_tokens"]),
                        completion_tokens=int(v["completion_tokens"]),
                        cached_prompt_tokens=int(v["cached_prompt_tokens"]), cost_usd=round(v["cost_usd"], 6))

    total = {m: sum(v[m] for v in sums.values()) for m in METRICS}
    return UsageReport(start=datetime.fromtimestamp(first, UTC).isoformat(),
                       end=datetime.fromtimestamp(t1, UTC).isoformat(), group_by=group_by,
                       key=own if keys else None,
                       rows=[row(g, v) for g, v in sorted(sums.items(), key=lambda kv: -kv[1]["prompt_tokens"])],
                       total=row("total", total))
