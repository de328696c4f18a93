"""ReasonWriter: checks every card, regenerates the failing ones once naming the violation, then marks
them failed, never passing them on (with code's factual reason, source "rule", by default; without text here
unless a test asks for it). The LLM is a scripted stand-in (bench/standin.py), as a
real model cannot be made to copy a title or borrow another card's facts on demand."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from services.reasoning.cards import ItemIn
from services.reasoning.generation import Generator, PriceTable, Timeouts
from services.reasoning.reasons import ReasonWriter
from support.standins import reasons_answer, reasons_text

QUERY = "부모님 결혼기념일 선물"
ITEMS = [ItemIn("g2", "향초와 디퓨저 세트", "리빙, 은은한 라벤더 향, 39,000원"),
         ItemIn("g3", "커플 실크 스카프", "패션, 결혼기념일 선물로 인기, 48,000원")]
GOOD = {"g2": ("두 분의 저녁을 은은하게 채워 줄 향기 선물",
               "라벤더 향이 은은해서 기념일 저녁을 차분한 분위기로 만들어 줍니다. "
               "부담 없는 가격이라 자녀가 드리기에도 좋습니다."),
        "g3": ("기념일 외출에 두 분이 함께 두르기 좋은 선물",
               "같은 무늬를 나눠 두르면 두 분의 기념일이 더 특별해집니다. 봄가을 나들이 옷차림에 잘 어울립니다.")}
COPY = ("향초와 디퓨저 세트", "리빙 제품, 은은한 라벤더 향의 향초와 디퓨저 세트, 39,000원입니다.")


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def writer_for():
    made = []

    def make(script, rule_reasons=False):
        standin = ChatStandIn(script)
        generator = Generator([OpenAIBackend("standin", standin.url, "m", schema_format="json_object")],
                              Timeouts(), PriceTable())
        made.append((standin, generator))
        return standin, ReasonWriter(generator, rule_reasons=rule_reasons)

    yield make
    for standin, _ in made:
        standin.close()


async def test_cards_that_pass_take_one_call(writer_for):
    standin, writer = writer_for([reasons_answer(**GOOD)])
    before = counter("mesh_reasoning_reason_cards_total", status="ok")
    reasons, usage = await writer.write(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())
    assert [(r.item_id, r.status, r.short) for r in reasons] == [("g2", "ok", GOOD["g2"][0]),
                                                                 ("g3", "ok", GOOD["g3"][0])]
    assert usage.llm_calls == 1 and len(standin.requests) == 1
    assert counter("mesh_reasoning_reason_cards_total", status="ok") == before + 2
    prompt = standin.requests[0]["messages"]
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]  # few-shot turn, then this one
    assert "[카드 2] id: g3" in prompt[-1]["content"] and "- 이름: 커플 실크 스카프" in prompt[-1]["content"]
    schema = standin.requests[0]["response_format"]["schema"]["properties"]["reasons"]["items"]["properties"]
    assert schema["short"]["maxLength"] == 40 and schema["long"]["maxLength"] == 100  # the prompt's caps


async def test_a_copied_card_is_regenerated_alone_with_its_violation_named(writer_for):
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=GOOD["g3"]), reasons_answer(g2=GOOD["g2"])])
    before = counter("mesh_reasoning_reason_violations_total", kind="copy")
    reasons, usage = await writer.write(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())
    assert [(r.item_id, r.status, r.violations) for r in reasons] == [("g2", "regenerated", ("copy", "duplicate")),
                                                                      ("g3", "ok", ())]
    assert reasons[0].short == GOOD["g2"][0] and usage.llm_calls == 2
    assert counter("mesh_reasoning_reason_violations_total", kind="copy") == before + 1
    redo = standin.requests[1]
    assert redo["response_format"]["schema"]["properties"]["reasons"]["items"]["properties"]["id"]["enum"] == ["g2"]
    assert "고칠 점: short가 상품명·설명을 그대로 옮겼습니다" in redo["messages"][-1]["content"]
    assert "커플 실크 스카프" not in redo["messages"][-1]["content"]


async def test_a_card_that_fails_again_is_returned_failed_without_text(writer_for):
    borrowed = (GOOD["g2"][0], "실크처럼 부드러운 향이 두 분께 잘 어울립니다. 거실에 두면 기념일 내내 은은합니다.")
    standin, writer = writer_for([reasons_answer(g2=borrowed, g3=GOOD["g3"]), reasons_answer(g2=borrowed)])
    before = counter("mesh_reasoning_reason_cards_total", status="failed")
    reasons, usage = await writer.write(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())
    failed = reasons[0]
    assert (failed.status, failed.short, failed.long, failed.violations) == ("failed", "", "", ("foreign_item",))
    assert reasons[1].status == "ok" and usage.llm_calls == 2 and len(standin.requests) == 2
    assert "다른 상품의 내용을 썼습니다: 실크" in standin.requests[1]["messages"][-1]["content"]
    assert counter("mesh_reasoning_reason_cards_total", status="failed") == before + 1


async def test_a_broken_regeneration_fails_only_the_failing_cards(writer_for):
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=GOOD["g3"]), {"chunks": ['{"reasons": [']}])
    reasons, usage = await writer.write(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())
    assert [(r.item_id, r.status) for r in reasons] == [("g2", "failed"), ("g3", "ok")]
    assert "copy" in reasons[0].violations and usage.llm_calls == 3  # first, regeneration, its schema retry


async def test_streamed_cards_come_as_their_json_closes_before_the_answer_ends(writer_for):
    text = reasons_text(**GOOD)
    cut = text.index('{"id": "g3"')
    # The stand-in stalls after the first card: the card must arrive while the answer is unfinished.
    standin, writer = writer_for([{"chunks": [text[:cut], text[cut:]], "stall_after": 1}])
    events = writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts(5, 30, 30))
    first = await anext(events)
    assert (first.item_id, first.status, first.short) == ("g2", "ok", GOOD["g2"][0])
    await events.aclose()  # the caller went away: the backend's request is released
    assert len(standin.requests) == 1


async def test_streamed_failing_cards_follow_after_their_regeneration(writer_for):
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=GOOD["g3"]), reasons_answer(g2=GOOD["g2"])])
    events = [e async for e in writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())]
    assert [(e.item_id, e.status) for e in events[:-1]] == [("g3", "ok"), ("g2", "regenerated")]
    assert events[-1].llm_calls == 2 and events[-1].completion_tokens > 0
    assert "고칠 점: short가 상품명·설명을 그대로 옮겼습니다" in standin.requests[1]["messages"][-1]["content"]


async def test_a_stream_cut_short_regenerates_the_cards_it_never_wrote(writer_for):
    text = reasons_text(**GOOD)
    cut = text.index('{"id": "g3"')
    standin, writer = writer_for([{"chunks": [text[:cut], text[cut:]], "break_after": 1},
                                  reasons_answer(g3=GOOD["g3"])])
    events = [e async for e in writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())]
    assert [(e.item_id, e.status) for e in events[:-1]] == [("g2", "ok"), ("g3", "regenerated")]
    assert events[-2].violations == ("missing",)
    assert "이 카드의 답이 없었습니다" in standin.requests[1]["messages"][-1]["content"]


async def test_streamed_regenerated_cards_come_as_their_json_closes(writer_for):
    copy_g3 = ("커플 실크 스카프", "패션 제품, 결혼기념일 선물로 인기인 커플 실크 스카프, 48,000원입니다.")
    text = reasons_text(**GOOD)
    cut = text.index('{"id": "g3"')
    # Both cards fail the first answer; the regeneration stalls after its first card, which must
    # arrive while that answer is unfinished.
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=copy_g3),
                                  {"chunks": [text[:cut], text[cut:]], "stall_after": 1}])
    events = writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts(5, 30, 30))
    first = await anext(events)
    assert (first.item_id, first.status, first.short, first.violations) == \
        ("g2", "regenerated", GOOD["g2"][0], ("copy", "duplicate"))
    await events.aclose()
    assert len(standin.requests) == 2
    redo = standin.requests[1]
    assert redo["response_format"]["schema"]["properties"]["reasons"]["items"]["properties"]["id"]["enum"] == \
        ["g2", "g3"]


async def test_a_streamed_card_that_fails_again_comes_failed_without_text(writer_for):
    borrowed = (GOOD["g2"][0], "실크처럼 부드러운 향이 두 분께 잘 어울립니다. 거실에 두면 기념일 내내 은은합니다.")
    standin, writer = writer_for([reasons_answer(g2=borrowed, g3=GOOD["g3"]), reasons_answer(g2=borrowed)])
    events = [e async for e in writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=Timeouts())]
    assert [(e.item_id, e.status, e.short, e.violations) for e in events[:-1]] == \
        [("g3", "ok", GOOD["g3"][0], ()), ("g2", "failed", "", ("foreign_item",))]
    assert events[-1].llm_calls == 2 and len(standin.requests) == 2


async def test_with_too_little_of_the_deadline_left_failing_cards_are_not_regenerated(writer_for):
    # A total deadline under MIN_REGENERATION_S leaves no time for a second call, streamed or not: the
    # copied card comes back failed, naming what it broke, after the one call.
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=GOOD["g3"]), reasons_answer(g2=COPY, g3=GOOD["g3"])])
    short = Timeouts(0.9, 0.9, 0.9)
    reasons, usage = await writer.write(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=short)
    assert [(r.item_id, r.status, r.short, r.violations) for r in reasons] == \
        [("g2", "failed", "", ("copy", "duplicate")), ("g3", "ok", GOOD["g3"][0], ())]
    assert usage.llm_calls == 1
    events = [e async for e in writer.stream(QUERY, ITEMS, max_tokens=0, temperature=0.2, timeouts=short)]
    assert [(e.item_id, e.status, e.violations) for e in events[:-1]] == \
        [("g3", "ok", ()), ("g2", "failed", ("copy", "duplicate"))]
    assert events[-1].llm_calls == 1 and len(standin.requests) == 2


async def test_a_card_that_fails_twice_gets_codes_factual_reason_marked_rule(writer_for):
    standin, writer = writer_for([reasons_answer(g2=COPY, g3=GOOD["g3"]), reasons_answer(g2=COPY)], rule_reasons=True)
    before = counter("mesh_reasoning_rule_reasons_total")
    reasons, _ = await writer.write("향기 좋은 디퓨저 세트 5만 원 이하", ITEMS, max_tokens=0, temperature=0.2,
                                    timeouts=Timeouts())
    rule = reasons[0]
    assert (rule.status, rule.source, rule.violations) == ("failed", "rule", ("copy", "duplicate"))
    assert rule.short == "'디퓨저 세트'에 맞는 상품"
    assert "상품 설명에 있는" in rule.long and reasons[1].source == "model"
    assert counter("mesh_reasoning_rule_reasons_total") == before + 1
    events = [e async for e in writer.stream("향기 좋은 디퓨저 세트", ITEMS, max_tokens=0, temperature=0.2,
                                             timeouts=Timeouts(0.9, 0.9, 0.9))]
    assert all(e.short for e in events[:-1]) and {e.source for e in events[:-1]} <= {"model", "rule"}
