"""No output value may be an example the task's instructions quote unless the input holds it (issue 77, item 7).

A held-out 카카오 notice came back from ``calendar_parse`` titled "네이버 1차 면접" — the example in the task's
own instructions — and the assistant repeated it. The model's answers here are scripted by a generator
that implements the real one's ``stream`` (no model runs in a unit test); the task runner, the task files
and their post steps are the real ones.
"""

from __future__ import annotations

import json

from services.reasoning.generation import Failed, Finished, Timeouts, Usage
from services.reasoning.tasks import Retry, TaskDone, TaskRunner
from services.runtime.tasks.checks import copied_example
from services.runtime.tasks.spec import BUILTIN_DIR, load_tasks

TASKS = load_tasks([BUILTIN_DIR])
KAKAO = {"text": "[카카오] 1차 기술 면접 안내: 다음 주 화요일 오후 3시, 판교 오피스에서 진행됩니다.",
         "reference_date": "2026-03-04"}


class Scripted:
    """Answers each call with the next scripted JSON object (the last one repeats)."""

    def __init__(self, *answers: dict) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def stream(self, messages, params, timeouts, *, failover=True):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        yield Finished("stop", Usage(prompt_tokens=10, completion_tokens=5, llm_calls=1),
                       json.dumps(answer, ensure_ascii=False))


async def run(task: str, value: dict, *answers: dict) -> tuple[list, Scripted]:
    generator = Scripted(*answers)
    runner = TaskRunner(generator, TASKS)  # type: ignore[arg-type]
    return [e async for e in runner.run(TASKS[task], value, Timeouts(5, 20, 30))], generator


def test_an_example_phrase_is_found_only_where_the_input_lacks_it():
    task = TASKS["calendar_parse"]
    assert "네이버1차면접" in task.example_phrases
    assert copied_example(task, {"title": "네이버 1차 면접"}, KAKAO) is not None
    naver = {**KAKAO, "text": "[네이버] 1차 면접 안내: 3월 10일 오후 2시"}
    assert copied_example(task, {"title": "네이버 1차 면접"}, naver) is None  # the input holds it: fine


async def test_a_copied_title_is_asked_again_then_written_by_code_from_the_notice():
    copied = {"company": "카카오", "stage": "면접", "title": "네이버 1차 면접", "start_text": "다음 주 화요일 오후 3시",
              "end_text": ""}
    events, generator = await run("calendar_parse", KAKAO, copied)
    assert generator.calls == 2 and isinstance(events[0], Retry) and "네이버1차면접" in events[0].error
    done = events[-1]
    assert isinstance(done, TaskDone), events
    assert done.result["title"] == "카카오 면접" and done.result["company"] == "카카오"
    right = {**copied, "title": "카카오 1차 기술 면접"}
    events, generator = await run("calendar_parse", KAKAO, copied, right)
    assert events[-1].result["title"] == "카카오 1차 기술 면접" and generator.calls == 2  # the retry's answer


async def test_a_skill_copied_from_the_instructions_that_no_repair_removes_fails_the_task():
    resume = {"resume": "백엔드 개발자 3년. Python, Django, PostgreSQL로 결제 시스템을 만들었습니다.",
              "posting": "Python 백엔드 개발자 채용"}
    task = TASKS["resume_analysis"]
    phrase = next(p for p in task.example_phrases if p not in resume["resume"] + resume["posting"])
    from bench.standin import minimal_instance
    answer = minimal_instance(task.spec.output_schema)

    def with_phrase(value):
        if isinstance(value, str):
            return phrase
        if isinstance(value, list):
            return [with_phrase(v) for v in value] or [phrase]
        if isinstance(value, dict):
            return {k: with_phrase(v) for k, v in value.items()}
        return value

    events, generator = await run("resume_analysis", resume, with_phrase(answer))
    assert generator.calls == 2 and isinstance(events[-1], Failed), events
    assert phrase in events[-1].message
