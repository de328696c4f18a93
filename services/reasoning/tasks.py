"""Runs declared tasks (services/runtime/tasks): render, constrained generation, validation, one retry, post step.

A run renders the task's templates with its (validated) input, streams the model's output under the
task's ``output_schema`` (the backend's grammar where it has one) and validates it here, formats
included. An output that does not validate — or is cut at ``max_tokens`` — is asked for once more with
the violation named (:class:`Retry` first: the streamed text so far is void); a second failure ends
the run with :class:`~services.reasoning.generation.Failed` ``schema_violation``, never with a result.
The post step (code, not the model) turns the output into the result, checked against
``result_schema``. Sampling is the task's (deterministic by default: temperature 0, a fixed seed).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.reasoning.backends.base import GenerationParams
from services.reasoning.generation import Delta, Failed, Finished, Generator, Timeouts, Usage, add_usage
from services.runtime.tasks.checks import copied_example, finish, first_error
from services.runtime.tasks.spec import Task

MIN_RETRY_S = 1.0  # less than this left of the deadline: no second attempt
RETRY_NOTE = ("앞의 답은 요구한 JSON 스키마를 어겼습니다: {error}\n"
              "스키마를 지키는 JSON 객체 하나만 다시 쓰세요.")


@dataclass(frozen=True)
class Retry:
    """The first output was invalid (``error`` names where); the deltas sent so far are void."""

    error: str


@dataclass(frozen=True)
class TaskDone:
    """The validated output, the post step's result and the accounting of every call."""

    output: dict
    result: dict
    attempts: int
    usage: Usage


TaskEvent = Delta | Retry | TaskDone | Failed


class TaskRunner:
    """Declared tasks over a :class:`Generator`."""

    def __init__(self, generator: Generator, tasks: dict[str, Task], *, cut: bool = True) -> None:
        self.generator = generator
        self.tasks = tasks
        self.cut = cut  # inputs reduced to the sections the task reads (its file's ``sections``)

    async def run(self, task: Task, value: dict, timeouts: Timeouts, *, model: str = "",
                  buffered: bool = False) -> AsyncIterator[TaskEvent]:
        """Stream one run of ``task`` over a checked ``value`` (see the module doc); ``buffered``: no deltas."""
        spec = task.spec
        system, prompt = task.render(value, cut=self.cut)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        params = GenerationParams(spec.max_tokens, spec.sampling.temperature, spec.output_schema,
                                  top_p=spec.sampling.top_p, seed=spec.sampling.seed, model=model,
                                  fresh_prompt=spec.sampling.reproducible)
        total = Usage(llm_calls=0)
        start = time.perf_counter()
        attempt_timeouts: Timeouts | None = timeouts
        error = ""
        while attempt_timeouts is not None:
            final: Finished | Failed | None = None
            async for event in self.generator.stream(messages, params, attempt_timeouts):
                if isinstance(event, Delta):
                    if not buffered:
                        yield event
                else:
                    final = event
            assert final is not None, "a generator stream always ends with Finished or Failed"
            total.llm_calls += 1
            add_usage(total, final.usage)
            if isinstance(final, Failed):
                yield Failed(final.kind, final.message, final.completion_tokens, total)
                return
            error = self._violation(task, final)
            copied = "" if error else copied_example(task, json.loads(final.text), value) or ""
            left = timeouts.total_s - (time.perf_counter() - start)
            last = total.llm_calls > 1 or left < MIN_RETRY_S
            if not error and (not copied or last):
                # An example copied even after the retry: the post step may put it right from the input
                # (a calendar title); a result that still holds it is refused.
                output = json.loads(final.text)
                try:
                    result = finish(task, output, value)
                except ValueError as err:
                    yield Failed("schema_violation", str(err), 0, total)
                    return
                still = copied_example(task, result, value, "result")
                if still:
                    yield Failed("schema_violation", f"{task.name}: {still}"[:500], 0, total)
                    return
                yield TaskDone(output, result, total.llm_calls, total)
                return
            error = error or copied
            if last:
                break
            yield Retry(error)
            attempt_timeouts = Timeouts(min(timeouts.first_token_s, left), min(timeouts.generation_s, left), left)
            messages = [*messages[:2], {"role": "assistant", "content": final.text[:8000]},
                        {"role": "user", "content": RETRY_NOTE.format(error=error)}]
        yield Failed("schema_violation", f"the output broke {task.name}'s output_schema: {error}"[:500], 0, total)

    @staticmethod
    def _violation(task: Task, final: Finished) -> str:
        """What is wrong with the answer ('' when it is a valid output)."""
        if final.finish_reason == "length":
            return f"output: cut at max_tokens ({task.spec.max_tokens}) before its JSON closed"
        try:
            output = json.loads(final.text)
        except ValueError:
            return "output: not JSON"
        if not isinstance(output, dict):
            return "output: not a JSON object"
        return first_error(task.output_validator, output, "output") or ""
