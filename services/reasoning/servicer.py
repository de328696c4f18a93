"""gRPC servicer: validates requests, runs :class:`Generator` / :class:`ReasonWriter`, maps events."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator

import jsonschema
from mesh.reasoning.v1 import reasoning_pb2 as pb

from services.bootstrap.errors import (
    FailedPrecondition,
    InvalidInput,
    MeshError,
    NotFound,
    Overloaded,
    Violation,
    grpc_code_for,
)
from services.reasoning.backends.base import GenerationParams
from services.reasoning.cards import ItemIn, ReasonOut
from services.reasoning.complete_request import check_text, complete_plan
from services.reasoning.completer import Completer, ToolCalls
from services.reasoning.completions import MAX_STOP
from services.reasoning.config import ReasoningSettings
from services.reasoning.generation import Delta, Failed, Finished, Generator, Timeouts, Usage
from services.reasoning.prompts import Turn, chat_messages, summary_messages
from services.reasoning.reasons import ReasonWriter
from services.reasoning.schema_checks import check_schema
from services.reasoning.schema_patterns import LinearValidator
from services.reasoning.tasks import Retry, TaskDone, TaskRunner
from services.runtime.tasks.checks import TaskInputError, checked_input
from services.runtime.tasks.spec import Task

KINDS = {"first_token_timeout": pb.ERROR_KIND_FIRST_TOKEN_TIMEOUT,
         "generation_timeout": pb.ERROR_KIND_GENERATION_TIMEOUT,
         "total_timeout": pb.ERROR_KIND_TOTAL_TIMEOUT, "backend_failed": pb.ERROR_KIND_BACKEND_FAILED,
         "schema_violation": pb.ERROR_KIND_SCHEMA_VIOLATION}
FINISH = {"stop": pb.FINISH_REASON_STOP, "length": pb.FINISH_REASON_LENGTH, "tool_calls": pb.FINISH_REASON_TOOL_CALLS}
ROLES = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant"}
STATUSES = {"ok": pb.REASON_STATUS_OK, "regenerated": pb.REASON_STATUS_REGENERATED,
            "failed": pb.REASON_STATUS_FAILED}
SOURCES = {"model": pb.REASON_SOURCE_MODEL, "rule": pb.REASON_SOURCE_RULE}


class ReasoningServicer:
    """Implements mesh.reasoning.v1.ReasoningService."""

    def __init__(self, generator: Generator, settings: ReasoningSettings, instance: str,
                 tasks: dict[str, Task] | None = None) -> None:
        self.generator = generator
        self.reasons = ReasonWriter(generator, rule_reasons=settings.rule_reasons,
                                    parallel=settings.reasons_parallel)
        self.completer = Completer(generator)
        self.tasks = TaskRunner(generator, tasks or {}, cut=settings.task_sections)
        self.s = settings
        self.instance = instance
        self.inflight = 0

    # -- validation ----------------------------------------------------------------------------

    def _params(self, o: pb.Options, violations: list[Violation], schema: dict | None = None,
                default_max: int | None = None) -> GenerationParams:
        max_tokens = o.max_tokens or default_max or self.s.default_max_tokens
        if not 1 <= max_tokens <= self.s.max_tokens_limit:
            violations.append(Violation("options.max_tokens", f"must be 1..{self.s.max_tokens_limit}"))
        temperature = o.temperature if o.HasField("temperature") else 0.3
        if not 0 <= temperature <= 2:
            violations.append(Violation("options.temperature", "must be 0..2"))
        top_p = o.top_p if o.HasField("top_p") else None
        if top_p is not None and not 0 < top_p <= 1:
            violations.append(Violation("options.top_p", "must be over 0 and at most 1"))
        if len(o.stop) > MAX_STOP or any(not x for x in o.stop):
            violations.append(Violation("options.stop", f"give at most {MAX_STOP} non-empty sequences"))
        return GenerationParams(max_tokens, temperature, schema, top_p=top_p, stop=tuple(o.stop),
                                seed=o.seed if o.HasField("seed") else None, model=o.model)

    def _timeouts(self, o: pb.Options, violations: list[Violation], total_default: float | None = None) -> Timeouts:
        t = o.timeouts
        for name in ("first_token_s", "generation_s", "total_s"):
            value = getattr(t, name)
            if not 0 <= value <= 600:
                violations.append(Violation(f"options.timeouts.{name}", "must be 0..600 seconds (0: default)"))
        total = t.total_s or total_default or self.s.total_timeout_s
        return Timeouts(first_token_s=t.first_token_s or min(self.s.first_token_timeout_s, total),
                        generation_s=t.generation_s or min(self.s.generation_timeout_s, total), total_s=total)

    def _text(self, field: str, value: str, violations: list[Violation], required: bool = True) -> None:
        check_text(field, value, violations, self.s.max_prompt_chars, required)

    def _admit(self) -> None:
        if self.inflight >= self.s.max_concurrent_calls:
            raise Overloaded(f"{self.inflight} calls in flight", retry_after_s=1.0)

    # -- mapping -------------------------------------------------------------------------------

    @staticmethod
    def reason(r: ReasonOut) -> pb.Reason:
        """ReasonOut -> proto (a failed card's texts are already empty or code's, ``source`` RULE)."""
        source = SOURCES[r.source] if r.short else pb.REASON_SOURCE_UNSPECIFIED
        return pb.Reason(item_id=r.item_id, short=r.short, long=r.long, status=STATUSES[r.status],
                         violations=list(r.violations), source=source)

    def usage(self, u: Usage) -> pb.Usage:
        """Usage -> proto."""
        return pb.Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, ttft_ns=u.ttft_ns,
                        total_ns=u.total_ns, tokens_per_second=u.tokens_per_second, cost_usd=u.cost_usd,
                        backend=u.backend, model=u.model, estimated=u.estimated, failed_over=u.failed_over,
                        llm_calls=u.llm_calls, instance=self.instance,
                        cached_prompt_tokens=u.cached_prompt_tokens)

    async def _events(self, response_cls, messages, params: GenerationParams, timeouts: Timeouts,
                      schema: dict | None = None) -> AsyncIterator:
        self._admit()
        self.inflight += 1
        try:
            async for event in self.generator.stream(messages, params, timeouts):
                if isinstance(event, Delta):
                    yield response_cls(delta=event.text)
                elif isinstance(event, Finished):
                    if schema is not None:
                        try:
                            jsonschema.validate(json.loads(event.text), schema, cls=LinearValidator)
                        except (ValueError, RecursionError, jsonschema.ValidationError) as err:
                            yield response_cls(error=pb.StreamError(
                                kind=pb.ERROR_KIND_SCHEMA_VIOLATION, message=str(err).splitlines()[0][:300],
                                completion_tokens=event.usage.completion_tokens, usage=self.usage(event.usage)))
                            return
                    yield response_cls(done=pb.Done(finish_reason=FINISH.get(event.finish_reason,
                                                                             pb.FINISH_REASON_STOP),
                                                    usage=self.usage(event.usage)))
                elif isinstance(event, Failed):
                    yield response_cls(error=pb.StreamError(kind=KINDS[event.kind], message=event.message,
                                                            completion_tokens=event.completion_tokens,
                                                            usage=self.usage(event.usage)))
        finally:
            self.inflight -= 1

    # -- RPCs ----------------------------------------------------------------------------------

    async def Generate(self, request, context):  # noqa: N802
        """Stream one prompt's answer."""
        violations: list[Violation] = []
        self._text("prompt", request.prompt, violations)
        self._text("system", request.system, violations, required=False)
        schema = None
        if request.options.json_schema:
            schema = check_schema(request.options.json_schema, "options.json_schema", violations)
        params = self._params(request.options, violations, schema)
        timeouts = self._timeouts(request.options, violations)
        if violations:
            raise InvalidInput("invalid generate request", violations)
        messages = ([{"role": "system", "content": request.system}] if request.system.strip() else []) + \
            [{"role": "user", "content": request.prompt}]
        async for out in self._events(pb.GenerateResponse, messages, params, timeouts, schema):
            yield out

    async def Chat(self, request, context):  # noqa: N802
        """Stream a chat turn."""
        violations: list[Violation] = []
        self._text("message", request.message, violations, required=False)  # emptiness: chat_messages
        self._text("system", request.system, violations, required=False)
        if request.options.json_schema:
            violations.append(Violation("options.json_schema", "not supported in chat; use Generate"))
        for i, m in enumerate(request.history):
            self._text(f"history[{i}].content", m.content, violations, required=False)
        params = self._params(request.options, violations)
        timeouts = self._timeouts(request.options, violations)
        history = [Turn(ROLES.get(m.role, "unspecified"), m.content) for m in request.history]
        messages: list[dict[str, str]] = []
        try:
            messages = chat_messages(request.system, history, request.message, self.s.max_history_tokens)
        except InvalidInput as err:
            violations += err.violations
        if violations:
            raise InvalidInput("invalid chat request", violations)
        async for out in self._events(pb.ChatResponse, messages, params, timeouts):
            yield out

    def _reasons_args(self, request, field: str = "") -> dict:
        """A reasons request's validated arguments for :class:`ReasonWriter` (raises InvalidInput)."""
        violations: list[Violation] = []
        self._text(f"{field}query", request.query, violations, required=False)
        params = self._params(request.options, violations, default_max=2048)
        timeouts = self._timeouts(request.options, violations)
        if violations:
            raise InvalidInput("invalid reasons request", violations)
        return {"query": request.query, "items": [ItemIn(i.id, i.title, i.description) for i in request.items],
                "max_tokens": request.options.max_tokens, "temperature": params.temperature, "timeouts": timeouts,
                "model": params.model}

    async def _reasons(self, request, field: str = "") -> pb.GenerateReasonsResponse:
        args = self._reasons_args(request, field)
        self._admit()
        self.inflight += 1
        try:
            reasons, usage = await self.reasons.write(**args)
        finally:
            self.inflight -= 1
        return pb.GenerateReasonsResponse(reasons=[self.reason(r) for r in reasons], usage=self.usage(usage))

    async def GenerateReasons(self, request, context):  # noqa: N802
        """Reasons for one query, one LLM call per card."""
        return await self._reasons(request)

    async def GenerateReasonsStream(self, request, context):  # noqa: N802
        """Reasons for one query, each card as soon as it is known, then ``done``."""
        args = self._reasons_args(request)
        self._admit()
        self.inflight += 1
        try:
            async for event in self.reasons.stream(**args):
                if isinstance(event, ReasonOut):
                    yield pb.GenerateReasonsStreamResponse(reason=self.reason(event))
                else:
                    yield pb.GenerateReasonsStreamResponse(done=pb.ReasonsDone(usage=self.usage(event)))
        finally:
            self.inflight -= 1

    async def GenerateReasonsBatch(self, request, context):  # noqa: N802
        """Reasons for several queries; each query's failure is its own."""
        if not 1 <= len(request.requests) <= 16:
            raise InvalidInput("give 1..16 requests", [Violation("requests", f"got {len(request.requests)}")])
        outcomes = []
        for i, req in enumerate(request.requests):
            try:
                outcomes.append(pb.ReasonsOutcome(response=await self._reasons(req, f"requests[{i}].")))
            except MeshError as err:
                detail = "; ".join(f"{v.field}: {v.description}" for v in getattr(err, "violations", []))
                outcomes.append(pb.ReasonsOutcome(error=f"{grpc_code_for(err).name}: {err.message}"
                                                        + (f" ({detail})" if detail else "")))
        return pb.GenerateReasonsBatchResponse(outcomes=outcomes)

    async def Summarize(self, request, context):  # noqa: N802
        """A summary within its deadline, or an explicit empty result."""
        violations: list[Violation] = []
        self._text("text", request.text, violations)
        sentences = request.max_sentences or 3
        if not 1 <= sentences <= 10:
            violations.append(Violation("max_sentences", "must be 1..10"))
        params = self._params(request.options, violations)
        timeouts = self._timeouts(request.options, violations, total_default=self.s.summary_timeout_s)
        if violations:
            raise InvalidInput("invalid summarize request", violations)
        result = await self.generator.complete(summary_messages(request.text, sentences), params, timeouts,
                                               failover=False)
        if isinstance(result, Failed):
            return pb.SummarizeResponse(failed=True, failure_reason=f"{result.kind}: {result.message}",
                                        usage=self.usage(result.usage))
        return pb.SummarizeResponse(summary=result.text.strip(), usage=self.usage(result.usage))

    # -- Complete ------------------------------------------------------------------------------

    async def Complete(self, request, context):  # noqa: N802
        """Stream an OpenAI-style completion: text deltas or tool calls, then done or error."""
        violations: list[Violation] = []
        plan = complete_plan(request, self.s, violations)
        params = self._params(request.options, violations)
        timeouts = self._timeouts(request.options, violations)
        if violations:
            raise InvalidInput("invalid complete request", violations)
        params = dataclasses.replace(params, model=request.model or params.model)
        self._admit()
        self.inflight += 1
        try:
            async for event in self.completer.run(plan, params, timeouts, buffered=request.buffered):
                if isinstance(event, Delta):
                    yield pb.CompleteResponse(delta=event.text)
                elif isinstance(event, ToolCalls):
                    yield pb.CompleteResponse(tool_calls=pb.ToolCalls(calls=[
                        pb.ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in event.calls]))
                elif isinstance(event, Finished):
                    yield pb.CompleteResponse(done=pb.Done(finish_reason=FINISH[event.finish_reason]
                                                           if event.finish_reason in FINISH else pb.FINISH_REASON_STOP,
                                                           usage=self.usage(event.usage)))
                else:
                    yield pb.CompleteResponse(error=pb.StreamError(kind=KINDS[event.kind], message=event.message,
                                                                   completion_tokens=event.completion_tokens,
                                                            usage=self.usage(event.usage)))
        finally:
            self.inflight -= 1

    # -- RunTask -------------------------------------------------------------------------------

    def _task(self, request) -> tuple[Task, dict, Timeouts]:
        task = self.tasks.tasks.get(request.task)
        if task is None:
            raise NotFound(f"task {request.task!r} is not declared here (tasks: {sorted(self.tasks.tasks)})")
        if request.version and request.version != task.spec.version:
            raise FailedPrecondition(f"task {task.name!r} is version {task.spec.version} here, "
                                     f"not {request.version}: the caller's task files differ")
        try:
            raw = json.loads(request.input_json or "null")
        except ValueError as err:
            raise InvalidInput("input_json is not JSON", [Violation("input_json", str(err)[:200])]) from None
        try:
            value = checked_input(task, raw)
        except TaskInputError as err:
            raise InvalidInput(err.message, [Violation(f, d) for f, d in err.violations]) from None
        violations: list[Violation] = []
        timeouts = self._timeouts(pb.Options(timeouts=request.timeouts), violations, total_default=task.spec.deadline_s)
        if violations:
            raise InvalidInput("invalid run task request", [Violation(v.field.removeprefix("options."), v.description)
                                                            for v in violations])
        return task, value, timeouts

    async def RunTask(self, request, context):  # noqa: N802
        """Stream one run of a declared task: output deltas (a retry between attempts), then done or error."""
        task, value, timeouts = self._task(request)
        self._admit()
        self.inflight += 1
        try:
            async for event in self.tasks.run(task, value, timeouts, model=request.model, buffered=request.buffered):
                if isinstance(event, Delta):
                    yield pb.RunTaskResponse(delta=event.text)
                elif isinstance(event, Retry):
                    yield pb.RunTaskResponse(retry=pb.TaskRetry(error=event.error))
                elif isinstance(event, TaskDone):
                    yield pb.RunTaskResponse(done=pb.TaskDone(
                        output_json=json.dumps(event.output, ensure_ascii=False),
                        result_json=json.dumps(event.result, ensure_ascii=False), attempts=event.attempts,
                        usage=self.usage(event.usage), version=task.spec.version))
                else:
                    yield pb.RunTaskResponse(error=pb.StreamError(kind=KINDS[event.kind], message=event.message,
                                                                  completion_tokens=event.completion_tokens,
                                                            usage=self.usage(event.usage)))
        finally:
            self.inflight -= 1
