"""``/v1/tasks``: declared tasks run on the reasoning service of their model route, with a response cache.

The gateway loads the same task files as the reasoning service (services/runtime/tasks), so it lists them,
refuses bad input before any call (400 naming ``input.<field>``) and routes each run by its role
(``--task-routes``). The run itself is the reasoning service's ``RunTask``: render, constrained
generation, validation, one retry naming the violation, post step; a second invalid output is a 502
``invalid_output``, never a success. Tasks that declare a cache keep the validated model output by
task version + route + model + canonical input (Redis when configured, else in process; fail open);
on a hit the post step runs here, on every request, so a date resolved against "today" is never
stale. No input or output text reaches a log line or a span.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import Counter

from clients.errors import MeshClientError
from clients.reasoning import Delta, StreamError, TaskDone, TaskEvent, TaskRetry, Timeouts, Usage
from gateway.http.errors import ApiError, FieldError, from_client_error
from gateway.http.streams import TextDelta
from gateway.http.telemetry import note
from gateway.reasoning.events import usage_of
from gateway.reasoning.pool import PooledStream
from gateway.reasoning.routes import ESCALATIONS, ModelRoute, ModelRoutes
from gateway.tasks import protocol as api
from gateway.tasks.store import KeyValue, StoreUnavailable
from services.runtime.tasks import post as steps
from services.runtime.tasks.checks import TaskInputError, checked_input, finish
from services.runtime.tasks.spec import Task

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("gateway")
RUNS = Counter("mesh_gateway_task_runs", "task runs by task and outcome", ["task", "outcome"])
CACHE = Counter("mesh_gateway_task_cache", "task response cache lookups and failures", ["event"])
for _event in ("hit", "miss", "error"):
    CACHE.labels(_event)


def canonical(value: object) -> str:
    """The same JSON for the same value, whatever the key order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def failed(err: StreamError) -> ApiError:
    """A run's error event: 502 for output that broke the schema twice, 504 out of time, else 503."""
    if err.kind == "schema_violation":
        return ApiError(502, "invalid_output", err.message[:400], retryable=True)
    if err.kind.endswith("timeout"):
        return ApiError(504, "deadline_exceeded", f"the task's output was not written in time ({err.kind})",
                        retryable=True)
    return ApiError(503, "unavailable", f"the task could not run ({err.kind}: {err.message})"[:300], retryable=True)


class TaskStream(PooledStream[TaskEvent]):
    """One ``RunTask`` stream holding its ring slot."""

    async def events(self) -> AsyncIterator[TaskEvent]:
        """Every event, the first (already read by :meth:`start`) included."""
        event = self._first
        while event is not None:
            yield event
            event = await anext(self.stream, None)


@dataclass
class Run:
    """One run being served: the task, its input (defaults filled), its route and cache key."""

    task: Task
    value: dict  # defaults filled (the cache key, the post step)
    given: dict  # as the caller sent it (the reasoning service checks it again)
    route: ModelRoute
    cache_key: str | None
    session: str
    start: float = field(default_factory=time.perf_counter)
    output: dict | None = None
    result: dict | None = None
    cached: bool = False
    attempts: int = 0
    usage: Usage | None = None
    llm_ms: float = 0.0
    escalated_from: str | None = None  # the cheaper route whose output broke the schema twice


class Tasks:
    """``/v1/tasks``: the declared tasks, run on their model routes."""

    def __init__(self, tasks: dict[str, Task], routes: ModelRoutes, route_of_role: dict[str, str],
                 store: KeyValue | None) -> None:
        self.tasks = tasks
        self.routes = routes
        self.route_of_role = route_of_role  # a task's role -> route name ('' = the default route)
        self.store = store
        self._store_down = False

    def route_name(self, task: Task) -> str:
        """The route a task runs on when a request names none."""
        return self.route_of_role.get(task.spec.route) or self.route_of_role.get("") or self.routes.default

    def get(self, name: str) -> Task:
        """The task ``name``; 404 ``task_not_found`` for an unknown one."""
        task = self.tasks.get(name)
        if task is None:
            raise ApiError(404, "task_not_found", f"task {name!r} is not declared; GET /v1/tasks lists them")
        return task

    def listing(self) -> api.TaskList:
        """Every task with its schemas."""
        out = []
        for task in self.tasks.values():
            s = task.spec
            out.append(api.TaskInfo(
                name=s.name, version=s.version, description=s.description, role=s.route, route=self.route_name(task),
                input_schema=s.input_schema, output_schema=s.output_schema,
                result_schema=s.result_schema or s.output_schema, post=s.post, sampling=s.sampling.model_dump(),
                max_tokens=s.max_tokens, deadline_s=s.deadline_s, cache_ttl_s=s.cache.ttl_s if s.cache else None,
                examples=[api.TaskExample(input=e) for e in s.examples]))
        return api.TaskList(tasks=out)

    async def prepare(self, name: str, body: api.TaskRequest) -> Run:
        """The run of ``body``: 404 for an unknown task or route, 400 naming the bad input field; a cache hit filled."""
        task = self.get(name)
        try:
            value = checked_input(task, body.input)
        except TaskInputError as err:
            raise ApiError(400, "invalid_argument", err.message,
                           fields=[FieldError(field=f, description=d) for f, d in err.violations]) from None
        route = self.routes.get(body.model or self.route_name(task))
        key = None
        if task.spec.cache is not None and body.cache:
            identity = canonical({"task": task.name, "version": task.spec.version, "route": route.name,
                                  "model": route.model, "input": value})
            key = f"task:{task.name}:v{task.spec.version}:{hashlib.sha256(identity.encode()).hexdigest()}"
        run = Run(task, value, body.input, route, key, body.session_id or key or canonical(value)[:256])
        await self._cached(run)
        return run

    async def _cached(self, run: Run) -> None:
        if run.cache_key is None or self.store is None:
            return
        try:
            raw = await self.store.get(run.cache_key)
        except StoreUnavailable as err:
            self._down(err)
            return
        self._up()
        output = json.loads(raw) if raw else None
        if isinstance(output, dict) and run.task.output_validator.is_valid(output):
            run.output, run.cached = output, True
            CACHE.labels("hit").inc()
        else:
            CACHE.labels("miss").inc()

    async def _remember(self, run: Run) -> None:
        if run.cache_key is None or self.store is None or run.task.spec.cache is None or run.output is None:
            return
        try:
            await self.store.set(run.cache_key, canonical(run.output), run.task.spec.cache.ttl_s)
        except StoreUnavailable as err:
            self._down(err)
            return
        self._up()

    def _down(self, err: Exception) -> None:
        CACHE.labels("error").inc()
        if not self._store_down:
            self._store_down = True
            log.warning("task cache unreachable (%s); tasks run uncached until it answers", err)

    def _up(self) -> None:
        if self._store_down:
            self._store_down = False
            log.info("task cache answers again")

    async def _generate(self, run: Run, deadline, *, buffered: bool = False) -> AsyncIterator[dict]:
        """The reasoning service's run: ``{"delta": text}`` as written, ``{"retry": error}`` before a second try.

        Sets ``run.output`` and ``run.result`` (and attempts, usage, llm_ms); an error event is an ApiError.
        """
        task = run.task
        total = min(task.spec.deadline_s, deadline.check())
        timeouts = Timeouts(first_token_s=total, generation_s=total, total_s=total)
        t0 = time.perf_counter()
        target, client = run.route.pool.acquire(run.session)
        stream = client.run_task(task.name, run.given, version=task.spec.version, timeouts=timeouts,
                                 model=run.route.model, session_id=run.session, buffered=buffered,
                                 timeout_s=total + 0.5)
        call = TaskStream(run.route.pool, target, stream)
        try:
            await call.start()
            async for event in call.events():
                if isinstance(event, Delta):
                    yield {"delta": event.text}
                elif isinstance(event, TaskRetry):
                    RUNS.labels(task.name, "retried").inc()
                    yield {"retry": event.error}
                elif isinstance(event, TaskDone):
                    run.output, run.result, run.attempts, run.usage = (event.output, event.result, event.attempts,
                                                                       event.usage)
                    return
                else:
                    if event.kind == "schema_violation":
                        RUNS.labels(task.name, "invalid_output").inc()
                    raise failed(event)
            raise ApiError(503, "unavailable", "the task's stream ended without a result", retryable=True)
        except MeshClientError as err:
            raise from_client_error(err) from None
        finally:
            await call.release()
            run.llm_ms = (time.perf_counter() - t0) * 1e3

    def _finish(self, run: Run) -> api.TaskResponse:
        assert run.output is not None
        task = run.task
        t = time.perf_counter()
        if run.result is None:  # a cache hit: the post step runs here, against today's reference date
            try:
                run.result = finish(task, run.output, run.value)
            except steps.PostError as err:
                raise ApiError(400, "invalid_argument", str(err),
                               fields=[FieldError(field=err.field, description=str(err))]) from None
            except ValueError as err:
                RUNS.labels(task.name, "invalid_output").inc()
                raise ApiError(502, "invalid_output", str(err)[:400]) from None
        post_ms = (time.perf_counter() - t) * 1e3
        RUNS.labels(task.name, "cached" if run.cached else "ok").inc()
        usage = usage_of(run.usage) if run.usage is not None else None
        note(task=task.name, task_version=task.spec.version, cached=run.cached, attempts=run.attempts)
        escalation = (api.Escalation(route=run.escalated_from, reason="invalid_output")
                      if run.escalated_from else None)
        return api.TaskResponse(task=task.name, version=task.spec.version, result=run.result, cached=run.cached,
                                attempts=run.attempts, route=run.route.name, usage=usage, escalation=escalation,
                                timings=api.TaskTimings(llm_ms=round(run.llm_ms, 3), post_ms=round(post_ms, 3),
                                                        total_ms=round((time.perf_counter() - run.start) * 1e3, 3)))

    def _escalate(self, run: Run, err: ApiError) -> bool:
        """Move ``run`` to its route's escalation after output that broke the schema twice (False: nowhere to go)."""
        bigger = self.routes.escalation(run.route)
        if err.body.error.code != "invalid_output" or bigger is None or run.escalated_from is not None:
            return False
        ESCALATIONS.labels("tasks", "invalid_output").inc()
        note(escalated_from=run.route.name)
        run.escalated_from, run.route = run.route.name, bigger
        return True

    async def run(self, run: Run, deadline) -> api.TaskResponse:
        """The validated result (from the cache, or from the model; once more on the larger route it escalates to)."""
        if not run.cached:
            with TRACER.start_as_current_span("gateway.task") as span:
                span.set_attributes({"mesh.task": run.task.name, "mesh.route": run.route.name})
                try:
                    while True:
                        try:
                            async for _ in self._generate(run, deadline, buffered=True):
                                pass
                            break
                        except ApiError as err:
                            if not self._escalate(run, err):
                                raise
                except ApiError as err:
                    if err.body.error.code != "invalid_output":
                        RUNS.labels(run.task.name, "failed").inc()
                    raise
                finally:
                    span.set_attribute("mesh.attempts", run.attempts)
            response = self._finish(run)
            await self._remember(run)
            return response
        return self._finish(run)

    async def events(self, run: Run, deadline) -> AsyncIterator[bytes]:
        """``delta`` as the output is written, ``retry`` before a second try, then ``done`` or ``error``.

        On a route that escalates, output that broke the schema twice is followed by ``escalate``
        (``{"from", "to", "reason"}``: what was written so far is void) and the larger route's deltas.
        """
        try:
            while not run.cached:
                try:
                    async for event in self._generate(run, deadline):
                        if "delta" in event:
                            yield api.STREAM.send("delta", TextDelta(text=event["delta"]))
                        else:
                            yield api.STREAM.send("retry", api.RetryEvent(attempt=2, error=event["retry"]))
                    break
                except ApiError as err:
                    if not self._escalate(run, err):
                        raise
                    yield api.STREAM.send("escalate", api.EscalateEvent(
                        from_=run.escalated_from or "", to=run.route.name, reason="invalid_output"))
            response = self._finish(run)
        except ApiError as err:
            if err.body.error.code != "invalid_output":
                RUNS.labels(run.task.name, "failed").inc()
            yield api.STREAM.error(err)
            return
        if not run.cached:
            await self._remember(run)
        yield api.STREAM.send("done", response)
