"""Reasoning service on port 0: against the real llama.cpp server (stream shape, usage, reasons,
cancellation) and against scripted stand-ins where a failure must be injected (stalls, broken
streams, schema-breaking answers, cards that break the checks). Assertions are on structure, never on
wording. The wire shape is read from the stubs; per-card statuses and the reasons stream through the
typed client (clients/reasoning.py), which is what callers use."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AsyncExitStack

import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from mesh.reasoning.v1 import reasoning_pb2 as pb
from mesh.reasoning.v1 import reasoning_pb2_grpc as pb_grpc

from clients.errors import InvalidArgument
from clients.reasoning import AsyncReasoningClient, Item, Options, Reason, ReasonsDone, ReasonsError, ReasonsRequest
from clients.reasoning import Timeouts as ClientTimeouts
from services.reasoning.backends.base import INFLIGHT
from services.reasoning.backends.openai_http import OpenAIBackend
from services.reasoning.checks import check_reason
from support import eventually_async
from support.servers import running_reasoning
from support.standins import ObservedChatStandIn, card_answer, per_card

pytestmark = pytest.mark.asyncio(loop_scope="session")
SLOW = pb.Options(timeouts=pb.Timeouts(first_token_s=120, generation_s=120, total_s=240))
ITEMS = [pb.Item(id="b1", title="빗소리 도서관", description="장편소설, 잔잔한 성장 이야기"),
         pb.Item(id="b2", title="우산을 쓴 고양이", description="그림책")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def real_service(llm_server):
    async with running_reasoning(backend_url=llm_server.base_url) as svc, \
            grpc.aio.insecure_channel(f"127.0.0.1:{svc.port}") as channel:
        yield pb_grpc.ReasoningServiceStub(channel), AsyncReasoningClient(f"127.0.0.1:{svc.port}", channel=channel)


@pytest.fixture
def real(real_service):
    return real_service[0]


def passes_checks(reason, items, query: str) -> bool:
    item = next(i for i in items if i.id == reason.item_id)
    others = [(o.title, o.description) for o in items if o.id != item.id]
    return check_reason(reason.short, reason.long, title=item.title, description=item.description, query=query,
                        others=others) == []


async def collect(call) -> list:
    return [event async for event in call]


def fields(err: grpc.aio.AioRpcError) -> list[str]:
    out = []
    for detail in rpc_status.from_call(err).details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out += [v.field for v in bad.field_violations]
    return out


async def test_generate_streams_deltas_then_exactly_one_done_with_usage(real):
    opts = pb.Options(max_tokens=12, temperature=0.0, timeouts=SLOW.timeouts)
    events = await collect(real.Generate(pb.GenerateRequest(prompt="한국의 수도는 어디인가요?", options=opts)))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and "error" not in kinds
    assert set(kinds[:-1]) == {"delta"} and len(kinds) >= 2
    usage = events[-1].done.usage
    # Every delta holds at least one token (the end-of-turn token is counted but sends no text).
    assert 1 <= len(kinds) - 1 <= usage.completion_tokens <= 12
    assert usage.ttft_ns > 0 and usage.total_ns >= usage.ttft_ns and usage.prompt_tokens > 0
    assert usage.backend == "local" and usage.model and usage.instance and usage.llm_calls == 1
    assert usage.cost_usd == 0.0  # a local model is not in the price table
    if usage.completion_tokens == 12:
        assert events[-1].done.finish_reason == pb.FINISH_REASON_LENGTH


async def test_a_prompt_asked_again_is_read_from_the_servers_prompt_cache(real):
    # llama-server reports the prompt tokens it reused (usage.prompt_tokens_details.cached_tokens): the
    # figure issue 63's "prompt cache across turns" check and the per-key cached tokens read.
    opts = pb.Options(max_tokens=2, temperature=0.0, timeouts=SLOW.timeouts)
    request = pb.GenerateRequest(prompt="면접 준비를 위해 자기소개를 한 문장으로 써 주세요.", options=opts)
    await collect(real.Generate(request))
    again = (await collect(real.Generate(request)))[-1].done.usage
    assert 0 < again.cached_prompt_tokens <= again.prompt_tokens


async def test_generate_with_a_json_schema_returns_valid_json(real):
    schema = {"type": "object", "required": ["city"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "maxLength": 20}}}
    opts = pb.Options(max_tokens=40, temperature=0.0, json_schema=json.dumps(schema), timeouts=SLOW.timeouts)
    events = await collect(real.Generate(pb.GenerateRequest(prompt="한국의 수도를 JSON으로 답하세요.", options=opts)))
    assert events[-1].WhichOneof("event") == "done", events[-1]
    data = json.loads("".join(e.delta for e in events[:-1]))
    assert set(data) == {"city"} and isinstance(data["city"], str)


async def test_reasons_for_all_items_one_call_each(real):
    resp = await real.GenerateReasons(pb.GenerateReasonsRequest(query="비 오는 날 읽기 좋은 책", items=ITEMS,
                                                                options=SLOW), timeout=300)
    assert [r.item_id for r in resp.reasons] == ["b1", "b2"]
    for reason in resp.reasons:
        if reason.status == pb.REASON_STATUS_FAILED:  # still failing after its regeneration: code's reason instead
            assert reason.source == pb.REASON_SOURCE_RULE and reason.short and reason.violations
        else:  # shown to the user: it passed every check
            assert reason.status in (pb.REASON_STATUS_OK, pb.REASON_STATUS_REGENERATED), reason
            assert passes_checks(reason, ITEMS, "비 오는 날 읽기 좋은 책"), reason
            assert bool(reason.violations) == (reason.status == pb.REASON_STATUS_REGENERATED)
    assert 2 <= resp.usage.llm_calls <= 4  # one call a card, and one regeneration of each card that failed


async def test_reasons_stream_sends_every_card_once_then_done(real_service):
    _, client = real_service
    items = [Item(i.id, i.title, i.description) for i in ITEMS]
    events = [e async for e in client.reasons_stream(
        "비 오는 날 읽기 좋은 책", items, options=Options(timeouts=ClientTimeouts(120, 120, 240)), timeout_s=300)]
    cards, done = events[:-1], events[-1]
    assert isinstance(done, ReasonsDone) and all(isinstance(c, Reason) for c in cards)
    assert sorted(c.item_id for c in cards) == ["b1", "b2"]
    for card in cards:
        assert card.status in ("ok", "regenerated", "failed")
        assert card.short and card.long and (card.source == "rule") == (card.status == "failed")
        assert card.status == "failed" or passes_checks(card, items, "비 오는 날 읽기 좋은 책")
    assert 2 <= done.usage.llm_calls <= 4 and done.usage.completion_tokens > 0 and done.usage.instance


async def test_cancelled_caller_cancels_the_backend_request(real):
    call = real.Generate(pb.GenerateRequest(prompt="한국의 사계절을 아주 길게 설명해 주세요.",
                                            options=pb.Options(max_tokens=400, timeouts=SLOW.timeouts)))
    async for event in call:
        assert event.WhichOneof("event") == "delta"
        break
    assert INFLIGHT.labels("local")._value.get() == 1
    call.cancel()

    async def inflight() -> float:
        return INFLIGHT.labels("local")._value.get()

    await eventually_async(inflight, lambda n: n == 0, timeout_s=10, what="the backend request released")
    # The server stopped too: a short call right after is not stuck behind ~400 tokens (~40 s here).
    start = time.monotonic()
    events = await collect(real.Generate(pb.GenerateRequest(prompt="안녕", options=pb.Options(
        max_tokens=2, timeouts=SLOW.timeouts))))
    assert events[-1].WhichOneof("event") == "done" and time.monotonic() - start < 20


async def test_bad_input_is_invalid_argument_with_fields(real):
    cases = [
        (real.Generate(pb.GenerateRequest(prompt=" ")), ["prompt"]),
        (real.Generate(pb.GenerateRequest(prompt="hi", options=pb.Options(max_tokens=5000))), ["options.max_tokens"]),
        (real.Generate(pb.GenerateRequest(prompt="hi", options=pb.Options(temperature=3))), ["options.temperature"]),
        (real.Generate(pb.GenerateRequest(prompt="hi", options=pb.Options(json_schema="{not json"))),
         ["options.json_schema"]),
        (real.Generate(pb.GenerateRequest(prompt="hi", options=pb.Options(json_schema='{"type": "nope"}'))),
         ["options.json_schema"]),
        (real.Chat(pb.ChatRequest(message="")), ["message"]),
        (real.Chat(pb.ChatRequest(message="다음", history=[pb.Message(role=pb.ROLE_USER, content="가" * 3100)])),
         ["history"]),
        (real.Chat(pb.ChatRequest(message="다음", history=[pb.Message(content="역할 없음")])), ["history[0].role"]),
    ]
    for call, expected in cases:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await collect(call)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert fields(info.value) == expected
    for request, expected in [
        (pb.GenerateReasonsRequest(query="q", items=[]), ["items"]),
        (pb.GenerateReasonsRequest(query="q", items=[ITEMS[0], ITEMS[0]]), ["items[1].id"]),
        (pb.GenerateReasonsRequest(query=" ", items=ITEMS[:1]), ["query"]),
        (pb.GenerateReasonsRequest(query="q", items=[pb.Item(id="x", title="가" * 501, description="나" * 2001)]),
         ["items[0].title", "items[0].description"]),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await real.GenerateReasons(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and fields(info.value) == expected
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await real.Summarize(pb.SummarizeRequest(text=""))
    assert fields(info.value) == ["text"]


# -- injected failures (stand-ins) ---------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def standins():
    made: list[ObservedChatStandIn] = []
    async with AsyncExitStack() as services:

        async def make(*scripts: list[dict], client: bool = False, **overrides):
            """A service over one stand-in per script: (its stub, or the typed client with ``client``; the
            stand-ins). Cold: a warm-up would take the first answer of a script."""
            ins = [ObservedChatStandIn(s) for s in scripts]
            made.extend(ins)
            backends = [OpenAIBackend(f"s{i}", s.url, "standin") for i, s in enumerate(ins)]
            svc = await services.enter_async_context(running_reasoning(backends, cold=True, **overrides))
            channel = await services.enter_async_context(grpc.aio.insecure_channel(f"127.0.0.1:{svc.port}"))
            stub = pb_grpc.ReasoningServiceStub(channel)
            return (AsyncReasoningClient(f"127.0.0.1:{svc.port}", channel=channel) if client else stub), ins

        yield make
    for s in made:
        s.close()


async def test_first_token_timeout(standins):
    stub, (s,) = await standins([{"first_delay_s": 2.0, "chunks": ["늦음"]}])
    opts = pb.Options(timeouts=pb.Timeouts(first_token_s=0.3, total_s=5))
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi", options=opts)))
    assert [e.WhichOneof("event") for e in events] == ["error"]
    assert events[0].error.kind == pb.ERROR_KIND_FIRST_TOKEN_TIMEOUT


async def test_the_first_token_stage_allows_for_reading_a_long_prompt(standins):
    """A cold 1,200-character prompt read at 1,000 tokens/s may take ~1.2 s before its first token is due."""
    prompt = "도구 설명과 스키마가 긴 프롬프트. " * 60
    opts = pb.Options(timeouts=pb.Timeouts(first_token_s=0.5, total_s=10))
    stub, _ = await standins([{"first_delay_s": 1.0, "chunks": ["늦었지만", " 답"]}], prefill_tokens_per_s=1000)
    events = await collect(stub.Generate(pb.GenerateRequest(prompt=prompt, options=opts)))
    assert [e.WhichOneof("event") for e in events][-1] == "done"
    stub, _ = await standins([{"first_delay_s": 1.0, "chunks": ["늦음"]}], prefill_tokens_per_s=0)
    events = await collect(stub.Generate(pb.GenerateRequest(prompt=prompt, options=opts)))
    assert events[-1].error.kind == pb.ERROR_KIND_FIRST_TOKEN_TIMEOUT, "without the allowance: the 0.5 s stage"


async def test_generation_timeout_after_the_first_token_never_looks_complete(standins):
    stub, (s,) = await standins([{"chunks": ["하나", "둘", "셋"], "stall_after": 1}])
    opts = pb.Options(timeouts=pb.Timeouts(first_token_s=2, generation_s=0.5, total_s=5))
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi", options=opts)))
    assert [e.WhichOneof("event") for e in events] == ["delta", "error"]
    assert events[1].error.kind == pb.ERROR_KIND_GENERATION_TIMEOUT and events[1].error.completion_tokens == 1
    assert await s.wait_cut_short()  # the stalled backend request was cancelled, not left open
    assert s.closed_early == 1


async def test_total_timeout(standins):
    stub, _ = await standins([{"chunks": ["하나", "둘"], "stall_after": 1}])
    opts = pb.Options(timeouts=pb.Timeouts(first_token_s=2, generation_s=10, total_s=0.8))
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi", options=opts)))
    assert events[-1].error.kind == pb.ERROR_KIND_TOTAL_TIMEOUT


async def test_failover_before_the_first_token_but_not_after(standins):
    dead = [{"status": 503}]
    ok = [{"chunks": ["대체", " 답"]}]
    stub, (s0, s1) = await standins(dead, ok)
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi")))
    assert events[-1].WhichOneof("event") == "done"
    assert "".join(e.delta for e in events[:-1]) == "대체 답"
    assert list(events[-1].done.usage.failed_over) == ["s0"] and events[-1].done.usage.backend == "s1"
    assert events[-1].done.usage.completion_tokens == 2 and not events[-1].done.usage.estimated

    stub, (b0, b1) = await standins([{"chunks": ["반쯤", "끊김"], "break_after": 1}], ok)
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi")))
    assert [e.WhichOneof("event") for e in events] == ["delta", "error"]
    assert events[1].error.kind == pb.ERROR_KIND_BACKEND_FAILED
    assert len(b1.requests) == 0  # no failover once text was streamed


async def test_a_stream_cut_short_without_a_finish_reason_is_an_error(standins):
    stub, _ = await standins([{"chunks": ["잘린"], "no_finish": True}])
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi")))
    assert [e.WhichOneof("event") for e in events] == ["delta", "error"]
    assert "finish reason" in events[-1].error.message


async def test_every_backend_down_is_a_typed_error(standins):
    stub, _ = await standins([{"status": 500}], [{"status": 502}])
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi")))
    assert [e.WhichOneof("event") for e in events] == ["error"]
    assert events[0].error.kind == pb.ERROR_KIND_BACKEND_FAILED


async def test_a_card_breaking_the_schema_is_regenerated_once_then_gets_codes_reason(standins):
    good = GOOD_CARDS  # reasons that pass the checks, so no regeneration follows
    stub, (s,) = await standins(per_card({"빗소리 도서관": [{"chunks": ['{"short": ']}, good["b1"]],
                                          "우산을 쓴 고양이": [good["b2"]]}))
    resp = await stub.GenerateReasons(pb.GenerateReasonsRequest(query="비 오는 날", items=ITEMS))
    assert resp.usage.llm_calls == 3 and [r.item_id for r in resp.reasons] == ["b1", "b2"]
    assert [r.status for r in resp.reasons] == [pb.REASON_STATUS_REGENERATED, pb.REASON_STATUS_OK]
    assert s.requests[0]["response_format"]["json_schema"]["schema"]["required"] == ["short", "long"]

    empty = [{"chunks": ["{}"]}]
    stub, (s,) = await standins(per_card({"빗소리 도서관": empty, "우산을 쓴 고양이": empty}))
    resp = await stub.GenerateReasons(pb.GenerateReasonsRequest(query="비 오는 날", items=ITEMS))
    assert len(s.requests) == 4 and all(r.source == pb.REASON_SOURCE_RULE and r.short for r in resp.reasons)


async def test_batch_isolates_each_query(standins):
    client, _ = await standins([card_answer("s", "l")], client=True)
    outcomes = await client.reasons_batch([ReasonsRequest("첫째", [Item("x", "t")]), ReasonsRequest("둘째", []),
                                           ReasonsRequest("셋째", [Item("x", "t")])])
    assert [type(o).__name__ for o in outcomes] == ["Reasons", "ReasonsError", "Reasons"]
    error = outcomes[1]
    assert isinstance(error, ReasonsError) and error.code == "INVALID_ARGUMENT" and "items" in error.message
    # "s" / "l" break the checks (too short, not Korean) in both answers: failed cards, with the kinds named,
    # and code's factual reason in their place.
    first = outcomes[0].reasons[0]  # type: ignore[union-attr]
    assert (first.status, first.source) == ("failed", "rule") and first.short and "length" in first.violations


GOOD_CARDS = GOOD = {"b1": ("창밖 빗소리와 어울리는 잔잔한 소설",
               "조용히 흘러가는 성장 이야기라 비 오는 오후에 천천히 읽기 좋습니다. "
               "긴 장편이라 하루를 온전히 맡길 수 있습니다."),
        "b2": ("비 오는 날 아이와 함께 넘겨 보는 그림책",
               "창밖 비를 보며 우산 쓴 고양이를 함께 찾아보기 좋습니다. 그림이 많아 어린 아이도 금방 빠져듭니다.")}
COPY = ("빗소리 도서관", "장편소설, 잔잔한 성장 이야기를 담은 빗소리 도서관입니다.")


async def test_each_card_carries_its_status_and_violations(standins):
    # b1 copies its item twice (the first answer and its regeneration); b2 passes at once.
    client, (s,) = await standins(per_card({"빗소리 도서관": [COPY], "우산을 쓴 고양이": [GOOD["b2"]]}), client=True)
    items = [Item(i.id, i.title, i.description) for i in ITEMS]
    out = await client.reasons("비 오는 날", items)
    failed, ok = out.reasons
    assert (failed.item_id, failed.status, failed.source) == ("b1", "failed", "rule")
    assert "copy" in failed.violations and failed.short not in COPY and failed.long not in COPY
    assert (ok.item_id, ok.status, ok.short, ok.violations) == ("b2", "ok", GOOD["b2"][0], ())
    assert out.usage.llm_calls == 3 and len(s.requests) == 3


async def test_reasons_stream_sends_a_card_before_the_next_is_written(standins):
    # The second card's call stalls (until its client goes away).
    client, (s,) = await standins(per_card({"빗소리 도서관": [GOOD["b1"]],
                                            "우산을 쓴 고양이": [{**card_answer(*GOOD["b2"]), "stall_after": 1}]}),
                                  client=True)
    items = [Item(i.id, i.title, i.description) for i in ITEMS]
    events = client.reasons_stream("비 오는 날", items)
    first = await anext(events)
    assert isinstance(first, Reason) and (first.item_id, first.status, first.short) == ("b1", "ok", GOOD["b1"][0])
    for _ in range(200):  # the second card's call reaches the stand-in and stalls there
        if len(s.requests) == 2:
            break
        await asyncio.sleep(0.01)
    await events.aclose()  # the caller leaves: the RPC is cancelled, and the LLM request behind it
    assert await s.wait_cut_short()


async def test_reasons_stream_sends_regenerated_cards_after_the_passing_ones(standins):
    client, (s,) = await standins(per_card({"빗소리 도서관": [COPY, GOOD["b1"]], "우산을 쓴 고양이": [GOOD["b2"]]}),
                                  client=True)
    items = [Item(i.id, i.title, i.description) for i in ITEMS]
    events = [e async for e in client.reasons_stream("비 오는 날", items)]
    assert [(e.item_id, e.status) for e in events[:-1]] == [("b2", "ok"), ("b1", "regenerated")]  # type: ignore
    assert "copy" in events[1].violations and events[1].short == GOOD["b1"][0]  # type: ignore[union-attr]
    assert isinstance(events[-1], ReasonsDone) and events[-1].usage.llm_calls == 3
    with pytest.raises(InvalidArgument) as info:
        [e async for e in client.reasons_stream("비 오는 날", [])]
    assert [v.field for v in info.value.violations] == ["items"]


async def test_summary_times_out_to_an_explicit_empty_result_without_retry(standins):
    # The backend stalls (for 30 s, unless its client goes away): only the summary's own timeout can end the call.
    stub, (s0, s1) = await standins([{"stall_after": 0, "chunks": ["늦은 요약"]}], [{"chunks": ["대체"]}],
                                    summary_timeout_s=0.5)
    resp = await stub.Summarize(pb.SummarizeRequest(text="긴 글입니다. " * 20))
    assert resp.failed and resp.summary == "" and "timeout" in resp.failure_reason
    assert await s0.wait_cut_short()  # ended at the timeout: the backend request was cut, not left running
    assert len(s0.requests) == 1 and len(s1.requests) == 0  # no retry, no failover


async def test_chat_prompt_is_system_then_history_then_turn(standins):
    stub, (s,) = await standins([{"chunks": ["네"]}])
    history = [pb.Message(role=pb.ROLE_USER, content="첫 질문"), pb.Message(role=pb.ROLE_ASSISTANT, content="첫 답")]
    await collect(stub.Chat(pb.ChatRequest(system="도우미", history=history, message="두번째 질문",
                                           session_id="s-1")))
    assert s.requests[0]["messages"] == [
        {"role": "system", "content": "도우미"}, {"role": "user", "content": "첫 질문"},
        {"role": "assistant", "content": "첫 답"}, {"role": "user", "content": "두번째 질문"}]


async def test_prices_make_cost(standins):
    stub, _ = await standins([{"chunks": ["가", "나"]}], prices_json='{"standin": [1000000, 2000000]}')
    events = await collect(stub.Generate(pb.GenerateRequest(prompt="hi")))
    assert events[-1].done.usage.cost_usd == pytest.approx(11 * 1.0 + 2 * 2.0)
