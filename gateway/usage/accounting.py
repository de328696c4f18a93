"""Every LLM-backed request's usage, per API key, route and model; quotas checked before the LLM is called.

The LLM usages a request returns (every ``usage`` object of its response or events, made by
:func:`gateway.reasoning.events.usage_of`) are gathered while it runs (:func:`record`); when it ends,
the middleware adds them to Prometheus (``mesh_gateway_llm_tokens_total`` and
``mesh_gateway_llm_cost_usd_total`` by key id, route template and model: bounded labels) and to the
hourly counters of the ledger (``GET /v1/usage``). So the figures are the sum of what the responses
said. Work a request leaves behind to run after it (an interview's next question written and its
answers scored in the background) is counted for the same caller and route when that work ends, if
it runs under :func:`charged_later`: its tokens and cost, and toward the caller's quota periods, but
not as another request. A job run by a worker (a conversation's list job) is charged to the key that
submitted it (:class:`JobCharges`), its quota checked again before it starts, under the route ``job:<kind>``.

Every ``POST`` is counted (a search with ``expand`` calls the LLM too). Quotas (gateway/usage/quotas.py):
a ``POST`` to an LLM route by a key with a limit first reserves an estimate (``--quota-request-tokens``)
in each of its periods, atomically (gateway/usage/ledger.py), under a lease (``--quota-lease-s``); another
route reserves when it comes to LLM work (:func:`admit_llm`); a
period already at its limit is a 429 ``quota_exceeded`` naming the quota, with ``Retry-After`` until
the period ends, before any LLM work. From ``soft`` × a limit, requests are logged and counted
(``mesh_gateway_quota_soft_total``) and carry ``X-Quota-Warning``.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import Counter

from gateway.http.auth import ANONYMOUS
from gateway.http.errors import ApiError, error_response
from gateway.http.telemetry import route_template
from gateway.usage.ledger import SEP, Ledger, hour_of
from gateway.usage.quotas import Quotas, windows

log = logging.getLogger(__name__)
TOKENS = Counter("mesh_gateway_llm_tokens", "LLM tokens of the gateway's responses by caller key, route and model",
                 ["key", "route", "model", "type"])
COST = Counter("mesh_gateway_llm_cost_usd", "LLM cost (USD, the reasoning service's price table) of the gateway's "
               "responses by caller key, route and model", ["key", "route", "model"])
REFUSED = Counter("mesh_gateway_quota_refused", "requests refused (429) by a quota", ["key", "period"])
SOFT = Counter("mesh_gateway_quota_soft", "requests past the soft share of a quota", ["key", "period"])
_USAGES: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("mesh_llm_usages", default=None)
# How the request running now counts usage recorded after it ended (work it left behind).
_LATER: contextvars.ContextVar[Callable[[list[Any]], Awaitable[None]] | None] = contextvars.ContextVar(
    "mesh_llm_later", default=None)
# How the request running now reserves quota room before LLM work a route does only sometimes (expand).
_ADMIT: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = contextvars.ContextVar(
    "mesh_llm_admit", default=None)
WRITES = frozenset({"POST", "PUT", "PATCH"})
T = TypeVar("T")


def record(usage: Any) -> None:
    """Count one LLM usage (a REST ``LlmUsage``) for the request that returns it."""
    current = _USAGES.get()
    if current is not None:
        current.append(usage)


async def admit_llm() -> None:
    """Check the caller's quota before LLM work on a route that is not an LLM route (a search with ``expand``).

    Reserves once per request, as an LLM route does before any work; 429 ``quota_exceeded`` (an
    :class:`ApiError`) when a period is full. Outside a counted request (a job: checked when it starts) it
    does nothing.
    """
    admit = _ADMIT.get()
    if admit is not None:
        await admit()


async def charged_later(work: Awaitable[T]) -> T:
    """Run ``work`` that a request starts and leaves behind, its LLM usage counted for that request's caller.

    Start it as the task (``asyncio.create_task(charged_later(...))``) while the request runs: the
    usage its LLM calls record is gathered apart from the request's own and counted when ``work`` ends,
    whether the request ended first or not. Outside a counted request it only runs ``work``.
    """
    later = _LATER.get()
    usages: list[Any] = []
    _USAGES.set(usages)  # this task's own context: the request's list is not touched
    try:
        return await work
    finally:
        if later is not None and usages:
            await later(usages)


class UsageAccounting:
    """ASGI middleware: gathers a request's LLM usage, counts it per key, route and model; enforces quotas."""

    def __init__(self, app: Any, ledger: Callable[[], Ledger], quotas: Quotas, llm_routes: tuple[str, ...],
                 routes: list[Any], estimate: int, lease_s: float = 900.0) -> None:
        self.app = app
        self._ledger = ledger  # the mesh's, once the app has started
        self.quotas = quotas
        self.llm_routes = llm_routes
        self.routes = routes
        self.estimate = estimate  # tokens reserved per request in flight
        self.lease_s = lease_s  # how long a reservation holds at most (a killed instance's end by themselves)

    @property
    def ledger(self) -> Ledger:
        """The usage ledger of the running mesh."""
        return self._ledger()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:  # noqa: D102
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") not in WRITES or not path.startswith("/v1/"):
            return await self.app(scope, receive, send)
        kid = (scope.get("state") or {}).get("key_id", ANONYMOUS)
        quota = self.quotas.of(kid)
        now = time.time()
        spans = windows(kid, quota, now) if quota.any else []
        periods: list = []  # the periods a reservation is held in, once admitted
        lease = uuid.uuid4().hex
        admitted = False

        async def admit() -> None:
            """Reserve in the key's periods (once per request): 429 ``quota_exceeded`` when one is full."""
            nonlocal admitted, periods
            if admitted or not spans:
                return
            admitted = True
            wanted = [w.period for w in spans]
            try:
                full = await self.ledger.reserve(wanted, self.estimate, lease, self.lease_s)
            except Exception as err:  # noqa: BLE001 - a ledger that does not answer: counted, never a failure
                log.warning("quota ledger did not answer (%s); the request runs unchecked", type(err).__name__)
                return
            if full:
                w = spans[full - 1]
                REFUSED.labels(kid, w.name).inc()
                limit = (f"{w.period.tokens} tokens" if w.period.tokens else
                         f"{w.period.cost_micro / 1e6:g} USD")
                raise ApiError(429, "quota_exceeded", f"the {w.name}'s quota of key {kid} ({limit} per {w.name}) "
                               "is used up", retryable=True, retry_after_s=float(math.ceil(w.ends_unix - now)))
            periods = wanted

        warning = ""
        if path.startswith(self.llm_routes):  # an LLM route: admitted before any work
            try:
                await admit()
            except ApiError as refusal:
                return await error_response(refusal)(scope, receive, send)
            if periods:
                warning = await self._soft(kid, spans, quota.soft)
        usages: list[Any] = []
        token = _USAGES.set(usages)
        admit_token = _ADMIT.set(admit)  # another route admits when it comes to LLM work (search with expand)
        route = route_template(self.routes, scope)

        async def later(left: list[Any]) -> None:  # what work this request left behind used, once it ends
            try:
                if periods:
                    await self.ledger.settle(periods, "", 0, sum(u.prompt_tokens + u.completion_tokens for u in left),
                                             round(sum(u.cost_usd for u in left) * 1e6))
                await count_usage(self.ledger, kid, route, left, time.time(), requests=0.0)
            except Exception as err:  # noqa: BLE001 - accounting never fails the work it counts
                log.warning("usage of background work not recorded (%s)", type(err).__name__)

        later_token = _LATER.set(later)

        async def send_warned(message: dict) -> None:
            if warning and message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-quota-warning", warning.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_warned)
        finally:
            _USAGES.reset(token)
            _LATER.reset(later_token)
            _ADMIT.reset(admit_token)
            tokens = sum(u.prompt_tokens + u.completion_tokens for u in usages)
            cost = sum(u.cost_usd for u in usages)
            try:
                if periods:
                    await self.ledger.settle(periods, lease, self.estimate, tokens, round(cost * 1e6))
                if usages:
                    await count_usage(self.ledger, kid, route, usages, now)
            except Exception as err:  # noqa: BLE001 - accounting never fails the request it counts
                log.warning("usage not recorded (%s)", type(err).__name__)

    async def _soft(self, kid: str, spans: list, share: float) -> str:
        """The soft-limit warning (empty when every period is under ``share`` of its limit)."""
        for w in spans:
            state = await self.ledger.period(w.period.key)
            used = state.get("used", 0)
            if w.period.tokens and used >= share * w.period.tokens:
                SOFT.labels(kid, w.name).inc()
                log.info("quota soft limit passed", extra={"key": kid, "period": w.name, "used": used,
                                                           "limit": w.period.tokens})
                return f"{w.name} tokens {used}/{w.period.tokens}"
        return ""


async def count_usage(ledger: Ledger, kid: str, route: str, usages: list[Any], now: float,
                      requests: float = 1.0) -> None:
    """Add usages to Prometheus and to the key's hour counters (fields: route, model, metric)."""
    counts: dict[str, float] = {}
    models = {u.model or u.backend or "unknown" for u in usages}
    for model in models:
        mine = [u for u in usages if (u.model or u.backend or "unknown") == model]
        values = {"requests": requests, "prompt_tokens": sum(u.prompt_tokens for u in mine),
                  "completion_tokens": sum(u.completion_tokens for u in mine),
                  "cached_prompt_tokens": sum(getattr(u, "cached_prompt_tokens", 0) for u in mine),
                  "cost_usd": sum(u.cost_usd for u in mine)}
        for metric, value in values.items():
            counts[SEP.join((route, model, metric))] = value
        for kind in ("prompt", "completion"):
            TOKENS.labels(kid, route, model, kind).inc(values[f"{kind}_tokens"])
        TOKENS.labels(kid, route, model, "cached_prompt").inc(values["cached_prompt_tokens"])
        COST.labels(kid, route, model).inc(values["cost_usd"])
    await ledger.add(kid, hour_of(now), counts)


class QuotaExceeded(Exception):
    """A job's key has used up a quota period (the job fails naming it)."""


class JobCharges:
    """A job's LLM usage charged to the key that submitted it, its quota checked before the job's LLM work.

    ``ledger``: the mesh's (a callable: it may be built after this); ``quotas``: the app's quota file.
    """

    def __init__(self, ledger: Callable[[], Ledger], quotas: Quotas, estimate: int, lease_s: float) -> None:
        self._ledger = ledger
        self.quotas = quotas
        self.estimate = estimate
        self.lease_s = lease_s

    async def run(self, kid: str, route: str, work: Awaitable[T]) -> T:
        """Run ``work`` for key ``kid``: :class:`QuotaExceeded` (``work`` not run) when a period is full."""
        ledger = self._ledger()
        quota = self.quotas.of(kid)
        now = time.time()
        spans = windows(kid, quota, now) if quota.any else []
        periods = [w.period for w in spans]
        lease = uuid.uuid4().hex
        if periods:
            try:
                full = await ledger.reserve(periods, self.estimate, lease, self.lease_s)
            except Exception as err:  # noqa: BLE001 - as for requests: a ledger that does not answer is logged
                log.warning("quota ledger did not answer (%s); the job runs unchecked", type(err).__name__)
                periods, full = [], 0
            if full:
                close = getattr(work, "close", None)
                if close is not None:
                    close()  # the coroutine is never awaited
                REFUSED.labels(kid, spans[full - 1].name).inc()
                raise QuotaExceeded(f"the {spans[full - 1].name}'s quota of key {kid} is used up")
        usages: list[Any] = []
        token = _USAGES.set(usages)
        try:
            return await work
        finally:
            _USAGES.reset(token)
            tokens = sum(u.prompt_tokens + u.completion_tokens for u in usages)
            try:
                if periods:
                    await ledger.settle(periods, lease, self.estimate, tokens,
                                        round(sum(u.cost_usd for u in usages) * 1e6))
                if usages:
                    await count_usage(ledger, kid, route, usages, time.time())
            except Exception as err:  # noqa: BLE001 - accounting never fails the work it counts
                log.warning("usage of a job not recorded (%s)", type(err).__name__)
