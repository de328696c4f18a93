"""Work a request leaves behind is counted for its caller when it ends (gateway/usage/accounting.py).

A small ASGI app behind the real middleware and the in-process ledger: the handler records one LLM
usage itself and starts a task under ``charged_later`` that records another after the response went
out. Both reach the caller's counters and quota period; the request is counted once; work started
outside ``charged_later`` is not counted, as before.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.http.auth import ANONYMOUS
from gateway.reasoning.protocol import LlmUsage
from gateway.usage.accounting import UsageAccounting, charged_later, record
from gateway.usage.ledger import SEP, MemoryLedger, hour_of
from gateway.usage.quotas import Quotas, windows

pytestmark = pytest.mark.asyncio


def usage(prompt: int, completion: int) -> LlmUsage:
    return LlmUsage(llm_calls=1, prompt_tokens=prompt, completion_tokens=completion, ttft_ms=1.0, total_ms=2.0,
                    tokens_per_second=1.0, cost_usd=0.0, backend="b", model="m", estimated=False, instance="i")


async def test_usage_of_work_left_behind_is_counted_for_the_caller_when_it_ends(tmp_path):
    left: list[asyncio.Task] = []
    release = asyncio.Event()

    async def later_work(charged: bool) -> None:
        await release.wait()  # the response is sent before this records anything
        record(usage(100, 20 if charged else 7))

    async def handler(request):
        record(usage(10, 2))
        left.append(asyncio.create_task(charged_later(later_work(True))))
        left.append(asyncio.create_task(later_work(False)))  # not under charged_later: not counted
        return JSONResponse({"ok": True})

    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("default: {tokens_per_day: 100000}\n", encoding="utf-8")
    ledger = MemoryLedger()
    app = Starlette(routes=[Route("/v1/chat/completions", handler, methods=["POST"])])
    wrapped = UsageAccounting(app, ledger=lambda: ledger, quotas=Quotas(quotas), llm_routes=("/v1/chat",),
                              routes=app.routes, estimate=500)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=wrapped), base_url="http://t") as http:
        assert (await http.post("/v1/chat/completions")).status_code == 200
    hour = hour_of(time.time())
    name = SEP.join(("/v1/chat/completions", "m", "{}"))
    counted = (await ledger.hours(ANONYMOUS, [hour]))[hour]
    assert counted[name.format("prompt_tokens")] == 10 and counted[name.format("requests")] == 1
    day = windows(ANONYMOUS, Quotas(quotas).of(ANONYMOUS), time.time())[0].period.key
    assert (await ledger.period(day))["used"] == 12

    release.set()
    await asyncio.gather(*left)
    counted = (await ledger.hours(ANONYMOUS, [hour]))[hour]
    assert counted[name.format("prompt_tokens")] == 110
    assert counted[name.format("completion_tokens")] == 22  # the uncharged task's 7 are not there
    assert counted[name.format("requests")] == 1  # work left behind is not another request
    state = await ledger.period(day)
    assert state["used"] == 132 and state["reserved"] == 0


async def test_charged_later_outside_a_request_only_runs_the_work():
    async def work() -> int:
        record(usage(1, 1))
        return 7

    assert await charged_later(work()) == 7
