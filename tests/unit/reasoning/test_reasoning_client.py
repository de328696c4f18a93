"""clients.reasoning: the proto <-> domain mapping, without a server (the calls themselves run in
tests/service/test_reasoning.py)."""

from __future__ import annotations

import json

from mesh.reasoning.v1 import reasoning_pb2 as pb

from clients.reasoning import (
    COMPLETE_ROLES,
    ERROR_KINDS,
    FINISH_REASONS,
    FORMAT_TYPES,
    REASON_STATUSES,
    ROLES,
    TOOL_MODES,
    Delta,
    Done,
    Options,
    Reason,
    Reasons,
    ReasonsDone,
    ReasonsError,
    StreamError,
    Timeouts,
    generation_event,
    options_to_proto,
    outcome_from_proto,
    reason_from_proto,
    reasons_event,
)


def named(enum) -> set[int]:
    return {v.number for v in enum.DESCRIPTOR.values if not v.name.endswith("_UNSPECIFIED")}


def test_every_enum_value_of_the_contract_has_a_name():
    assert set(REASON_STATUSES) == named(pb.ReasonStatus)
    assert set(ERROR_KINDS) == named(pb.ErrorKind)
    assert set(FINISH_REASONS) == named(pb.FinishReason)
    assert set(COMPLETE_ROLES.values()) == named(pb.Role) and set(ROLES.values()) <= named(pb.Role)
    assert set(TOOL_MODES.values()) == named(pb.ToolChoiceMode)
    assert set(FORMAT_TYPES.values()) == named(pb.ResponseFormatType)


def test_reasons_carry_status_and_violations_and_an_unset_status_is_none():
    failed = reason_from_proto(pb.Reason(item_id="a", status=pb.REASON_STATUS_FAILED, violations=["copy", "length"]))
    assert failed == Reason("a", "", "", "failed", ("copy", "length"))
    assert reason_from_proto(pb.Reason(item_id="b", short="s", long="l")).status is None  # an older service
    event = reasons_event(pb.GenerateReasonsStreamResponse(reason=pb.Reason(item_id="c",
                                                                            status=pb.REASON_STATUS_REGENERATED)))
    assert isinstance(event, Reason) and event.status == "regenerated"
    done = reasons_event(pb.GenerateReasonsStreamResponse(done=pb.ReasonsDone(usage=pb.Usage(llm_calls=2))))
    assert isinstance(done, ReasonsDone) and done.usage.llm_calls == 2


def test_batch_outcomes():
    ok = outcome_from_proto(pb.ReasonsOutcome(response=pb.GenerateReasonsResponse(
        reasons=[pb.Reason(item_id="x", status=pb.REASON_STATUS_OK)], usage=pb.Usage(failed_over=["s0"]))))
    assert isinstance(ok, Reasons) and ok.reasons[0].status == "ok" and ok.usage.failed_over == ("s0",)
    bad = outcome_from_proto(pb.ReasonsOutcome(error="INVALID_ARGUMENT: invalid reasons request (items: empty)"))
    assert bad == ReasonsError("INVALID_ARGUMENT", "invalid reasons request (items: empty)")


def test_stream_events():
    assert generation_event(pb.GenerateResponse(delta="가")) == Delta("가")
    done = generation_event(pb.ChatResponse(done=pb.Done(finish_reason=pb.FINISH_REASON_LENGTH,
                                                         usage=pb.Usage(completion_tokens=3))))
    assert isinstance(done, Done) and done.finish_reason == "length" and done.usage.completion_tokens == 3
    error = generation_event(pb.GenerateResponse(error=pb.StreamError(kind=pb.ERROR_KIND_GENERATION_TIMEOUT,
                                                                      message="late", completion_tokens=1)))
    assert error == StreamError("generation_timeout", "late", 1)


def test_options():
    assert not options_to_proto(None).HasField("temperature")
    o = options_to_proto(Options(max_tokens=8, temperature=0.0, timeouts=Timeouts(1, 2, 3),
                                 json_schema={"type": "object"}))
    assert o.HasField("temperature") and o.temperature == 0.0 and o.max_tokens == 8
    assert (o.timeouts.first_token_s, o.timeouts.generation_s, o.timeouts.total_s) == (1, 2, 3)
    assert json.loads(o.json_schema) == {"type": "object"}
    assert not options_to_proto(Options()).HasField("temperature") and options_to_proto(Options()).json_schema == ""
