"""A declared task's input in an assistant turn: the person's words, the session's date and time zone."""

from __future__ import annotations

from types import SimpleNamespace

from gateway.assistant.serving import Assistant


def _assistant(properties: dict) -> Assistant:
    assistant = Assistant.__new__(Assistant)
    spec = SimpleNamespace(input_schema={"properties": properties})
    assistant.tasks = SimpleNamespace(tasks={"calendar_parse": SimpleNamespace(spec=spec)})
    return assistant


def test_the_sessions_zone_and_date_reach_a_task_that_reads_them_and_the_model_sets_neither():
    assistant = _assistant({"text": {}, "reference_date": {}, "timezone": {}})
    meta = {"reference_date": "2026-03-04", "timezone": "Europe/Berlin"}
    said = "다음 주 화요일 3시 면접"
    out = assistant._inputs(meta, "calendar_parse", {"text": "모델이 쓴 말", "timezone": "UTC"}, said)
    assert out == {"text": said, "reference_date": "2026-03-04", "timezone": "Europe/Berlin"}
    assert assistant._inputs({}, "calendar_parse", {}, "내일")["timezone"] == "Asia/Seoul"  # the stated default


def test_a_task_without_a_zone_gets_none():
    assistant = _assistant({"text": {}})
    assert assistant._inputs({"timezone": "Europe/Berlin"}, "calendar_parse", {}, "안녕") == {"text": "안녕"}
