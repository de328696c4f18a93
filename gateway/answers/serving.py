"""Grounded answers: the standalone question, hybrid search, passages packed, one schema-constrained answer.

The answer is a JSON object (``answerable``, ``answer``, ``citations``) held to its schema by the
backend's grammar and validated by the reasoning service; the gateway checks every citation against
the passages it gave (one naming none is removed and counted) and says ``answerable: false`` rather
than answering without passages. Search degrades as ``/v1/search`` does (keyword-only, marked). No
question or passage text reaches a log line or a span: only counts and timings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from opentelemetry import trace
from prometheus_client import Counter

from clients.reasoning import ChatMessage
from gateway.access.context import require_read
from gateway.answers import packing, relevance, support
from gateway.answers import protocol as api
from gateway.answers import question as asked
from gateway.answers.cache import AnswerCache, Hit, scope_of
from gateway.config import GatewaySettings
from gateway.files.serving import page_of
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.http.streams import TextDelta
from gateway.http.telemetry import note
from gateway.reasoning.events import usage_of
from gateway.reasoning.protocol import Escalation
from gateway.reasoning.routes import ESCALATIONS, ModelRoute, ModelRoutes
from gateway.reasoning.structured import StructuredFailed, StructuredStream, open_structured, structured
from gateway.search.protocol import Hit as SearchHit
from gateway.search.protocol import SearchRequest, SearchResponse
from gateway.search.serving import Search

TRACER = trace.get_tracer("gateway")
ANSWERS = Counter("mesh_gateway_answers", "grounded answers by outcome", ["outcome"])
CITATIONS_REMOVED = Counter("mesh_gateway_answer_citations_removed", "citations that named no passage, removed")
REFUSED_BY = Counter("mesh_gateway_answer_checks_refused", "answers the model proposed that a support check refused",
                     ["check"])
for _outcome in ("answered", "no_passages", "not_relevant", "not_in_passages", "unsupported", "failed"):
    ANSWERS.labels(_outcome)

ANSWER_SYSTEM = (
    "당신은 주어진 자료만 근거로 질문에 답하는 도우미입니다. 자료의 문장마다 <번호>가 붙어 있습니다. 규칙:\n"
    "1. 자료에 있는 내용으로만 답하고, 자료에 없는 사실을 지어내지 마세요.\n"
    "2. 자료에 질문의 답이 없으면 answerable을 false로, answer를 빈 문자열로, evidence를 빈 목록으로 두세요.\n"
    "3. 답의 근거가 된 문장의 번호를 evidence에 넣으세요(1~4개).\n"
    "4. 답은 근거 문장의 낱말을 그대로 써서 한국어로 1~2문장으로 짧게 쓰세요.")
ANSWER_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["answerable", "answer", "evidence"],
                 "properties": {"answerable": {"type": "boolean"}, "answer": {"type": "string"},
                                "evidence": {"type": "array", "maxItems": support.MAX_EVIDENCE,
                                             "items": {"type": "integer"}}}}
REWRITE_SYSTEM = ("대화의 마지막 질문을 앞의 대화를 보지 않아도 이해되는 하나의 질문으로 다시 쓰세요. 대화에 나온 "
                  "대상(회사, 제품, 정책, 책의 이름)을 질문에 넣고, 묻는 내용은 바꾸지 마세요.")
REWRITE_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["question"],
                  "properties": {"question": {"type": "string"}}}
REWRITE_TURNS = 6  # the last 3 exchanges
REWRITE_TURN_CHARS = 400


@dataclass
class Prepared:
    """Everything before the answer call: the question searched, the search, the passages and the prompt."""

    body: api.AnswerRequest
    rewrite: api.Rewrite
    found: SearchResponse
    passages: list[packing.Passage]
    sentences: list[support.Sentence]
    relevance: relevance.Relevance | None
    dropped: dict[str, int]
    search_ms: float
    start: float
    slot: Slot | None = None  # where a checked answer is stored in the answer cache (None: not cached)


@dataclass(frozen=True)
class Slot:
    """Where an answer goes in the answer cache: the collection's generation, the search settings, the vector."""

    collection: str
    generation: str
    scope: str
    question: str
    vector: list[float]


@dataclass
class Served:
    """A question answered from the answer cache: the response, with nothing searched or asked."""

    response: api.AnswerResponse


def failed(err: StructuredFailed) -> ApiError:
    """An answer call that gave nothing, as the rest of the gateway answers the same failure.

    504 out of time, 400 for a prompt too long, 429 + ``Retry-After`` when the reasoning service is
    overloaded, 502 when the model's output broke its schema (after the service's one regeneration), else 503.
    """
    if "deadline" in err.reason or err.reason.endswith("timeout"):
        return ApiError(504, "deadline_exceeded", f"the answer was not written in time ({err.reason})", retryable=True)
    if err.reason in ("invalid_argument", "context_length_exceeded"):
        return ApiError(400, err.reason, err.message or err.reason)
    if err.reason == "resource_exhausted":
        return ApiError(429, "overloaded", f"the reasoning service is overloaded; retry shortly ({err.message})"[:300],
                        retryable=True, retry_after_s=1.0)
    if err.reason in ("schema_violation", "invalid_output"):
        return ApiError(502, "invalid_output", f"the model's answer broke its schema ({err.message})"[:300],
                        retryable=True)
    return ApiError(503, "unavailable", f"the answer could not be written ({err.reason}: {err.message})"[:300],
                    retryable=True)


class Answers:
    """``POST /v1/answers`` over search and a model route."""

    def __init__(self, search: Search, routes: ModelRoutes, settings: GatewaySettings,
                 cache: AnswerCache | None = None) -> None:
        self.search = search
        self.routes = routes
        self.route = settings.route_of(settings.answers_route)
        self.settings = settings
        self.cache = cache if settings.answer_cache else None
        asked.frequencies()  # read now, not on the event loop at the first answer

    async def _rewrite(self, body: api.AnswerRequest, deadline: Deadline) -> api.Rewrite:
        start = time.perf_counter()
        if not body.history:
            return api.Rewrite(status="skipped", query=body.question, ms=0.0)
        turns = "\n".join(f"{'사용자' if t.role == 'user' else '도우미'}: {t.content[:REWRITE_TURN_CHARS]}"
                          for t in body.history[-REWRITE_TURNS:])
        messages = [ChatMessage("system", REWRITE_SYSTEM),
                    ChatMessage("user", f"대화:\n{turns}\n\n마지막 질문: {body.question}")]
        total = min(self.settings.answer_rewrite_timeout_s, deadline.check() * 0.3)
        with TRACER.start_as_current_span("gateway.answer.rewrite") as span:
            try:
                value, _ = await structured(self.routes.get(body.model or self.route), messages, REWRITE_SCHEMA,
                                            "standalone_question", key=body.session_id or body.question,
                                            total_s=total, max_tokens=96)
                query = value.get("question", "").strip() if isinstance(value, dict) else ""
                reason = None if query else "empty"
            except StructuredFailed as err:
                query, reason = "", err.reason
            span.set_attribute("mesh.rewrite", "ok" if query else "failed")
        ms = round((time.perf_counter() - start) * 1e3, 1)
        if not query:
            return api.Rewrite(status="failed", query=body.question, reason=reason, ms=ms)
        return api.Rewrite(status="ok", query=query[:2000], ms=ms)

    async def _cached(self, body: api.AnswerRequest, rewrite: api.Rewrite,
                      deadline: Deadline) -> tuple[Slot | None, Hit | None, float]:
        """The answer cache's slot for this question and the answer it already holds, if any; ms spent."""
        t = time.perf_counter()
        if self.cache is None or not body.cache or body.mode == "keyword":
            return None, None, 0.0
        with TRACER.start_as_current_span("gateway.answer.cache") as span:
            vector = await self.search.query_vector(body.collection, rewrite.query, deadline)
            generation = await self.cache.generation(body.collection) if vector is not None else None
            if vector is None or generation is None:
                span.set_attribute("mesh.answer_cache", "off")
                return None, None, (time.perf_counter() - t) * 1e3
            scope = scope_of(mode=body.mode, filter=body.filter.model_dump() if body.filter else None,
                             top_k=body.top_k, min_score=body.min_score, min_relevance=body.min_relevance,
                             route=body.model or self.route, revision=vector.revision)
            slot = Slot(body.collection, generation, scope, rewrite.query, list(vector.values))
            hit = await self.cache.find(body.collection, generation, scope, rewrite.query, slot.vector)
            if hit is not None and self._other_question(rewrite.query, hit.response):
                hit = None  # the cached answer's evidence lacks this question's subject or qualifiers
            span.set_attribute("mesh.answer_cache", "hit" if hit else "miss")
        return slot, hit, (time.perf_counter() - t) * 1e3

    @staticmethod
    def _other_question(query: str, response: dict) -> str | None:
        """Why a cached answer does not answer ``query`` (gateway/answers/question.py), or None when it does."""
        cited = response.get("citations") or []
        evidence = " ".join(f"{(c.get('payload') or {}).get('title') or ''} {c.get('text') or ''}" for c in cited)
        return asked.mismatch(asked.read(query), str(response.get("answer") or ""), evidence)

    def served(self, collection: str, hit: Hit, rewrite: api.Rewrite, start: float, cache_ms: float) -> Served:
        """The cached answer as this request's response: marked, no usage, this request's timings."""
        ANSWERS.labels("answered").inc()
        note(collection=collection, answerable=True, answer_reason="answered", answer_cache="semantic")
        timings = api.AnswerTimings(rewrite_ms=rewrite.ms, search_ms=0.0, llm_ttft_ms=None,
                                    total_ms=round((time.perf_counter() - start) * 1e3, 3), cache_ms=round(cache_ms, 3))
        return Served(api.AnswerResponse.model_validate({
            **hit.response, "cached": "semantic", "cache": {"question": hit.question, "similarity": hit.similarity},
            "usage": None, "rewrite": rewrite.model_dump(), "timings": timings.model_dump()}))

    async def store(self, p: Prepared, out: api.AnswerResponse) -> None:
        """Keep a checked answer in the answer cache (only answers the checks kept)."""
        if self.cache is not None and p.slot is not None and out.answerable and not out.degraded:
            s = p.slot
            await self.cache.put(s.collection, s.generation, s.scope, s.question, s.vector,
                                 out.model_dump(exclude={"usage", "timings", "escalation"}))

    async def prepare(self, body: api.AnswerRequest, deadline: Deadline) -> Prepared | Served:
        """The standalone question, its search and the packed passages (bad input and search errors raise).

        Or, when the answer cache holds an answer to the same question, that answer (:class:`Served`).
        """
        start = time.perf_counter()
        require_read(body.collection)  # a collection the key may not read is a 404 before any work (and the cache)
        self.routes.get(body.model or self.route)  # an unknown route is a 404 before any work
        rewrite = await self._rewrite(body, deadline)
        slot, hit, cache_ms = await self._cached(body, rewrite, deadline)
        if hit is not None:
            return self.served(body.collection, hit, rewrite, start, cache_ms)
        t = time.perf_counter()
        found = await self.search.search(SearchRequest(collection=body.collection, query=rewrite.query,
                                                       top_k=body.top_k, mode=body.mode, filter=body.filter), deadline)
        search_ms = (time.perf_counter() - t) * 1e3
        floor = self.settings.answer_min_score if body.min_score is None else body.min_score
        dense_ran = found.mode != "keyword"
        kept = [h for h in found.hits
                if not dense_ran or floor <= 0 or (h.dense_score is not None and h.dense_score >= floor)]
        with TRACER.start_as_current_span("gateway.answer.pack") as span:
            # Off the event loop: up to top_k documents of 20,000 characters are read here (linear, but
            # milliseconds of pure Python the other requests must not wait behind).
            passages, duplicates = await asyncio.to_thread(
                packing.pack, [packing.Hit(h.id, h.text, h.score, h.dense_score, h.payload, _span(h)) for h in kept],
                rewrite.query, self.settings.answer_context_chars)
            span.set_attributes({"mesh.passages": len(passages), "mesh.below_floor": len(found.hits) - len(kept),
                                 "mesh.near_duplicates": duplicates})
        threshold = body.min_relevance if body.min_relevance is not None else (
            relevance.THRESHOLD if self.settings.answer_min_relevance is None else self.settings.answer_min_relevance)
        decision = relevance.decide(rewrite.query, kept, passages, threshold) if dense_ran and passages else None
        return Prepared(body, rewrite, found, passages, support.numbered(passages), decision,
                        {"below_floor": len(found.hits) - len(kept), "near_duplicate": duplicates}, search_ms, start,
                        slot=slot)

    def messages(self, p: Prepared) -> list[ChatMessage]:
        """The answer call's prompt: the rules, the numbered passages, the (standalone) question."""
        return [ChatMessage("system", ANSWER_SYSTEM),
                ChatMessage("user", f"자료:\n{support.context(p.passages, p.sentences)}\n\n질문: {p.rewrite.query}")]

    async def _open(self, p: Prepared, deadline: Deadline, route: ModelRoute) -> StructuredStream:
        s = self.settings
        return await open_structured(route, self.messages(p), ANSWER_SCHEMA,
                                     "grounded_answer", key=p.body.session_id or p.rewrite.query,
                                     total_s=min(s.reasoning_total_s, deadline.check()),
                                     max_tokens=s.answer_max_tokens, buffered=True)

    async def _write(self, p: Prepared, deadline: Deadline, route: ModelRoute) -> api.AnswerResponse:
        """One answer call on ``route``, checked (StructuredFailed when it gave nothing)."""
        call = await self._open(p, deadline, route)
        try:
            async with aclosing(call.deltas()) as deltas:  # closed with the caller, not when collected
                async for _ in deltas:
                    pass
        finally:  # a client that left mid-answer frees its ring slot now
            await call.release()
        return self.response(p, call.value, call, route.name)

    async def written(self, p: Prepared, deadline: Deadline) -> api.AnswerResponse:
        """The model's checked answer; when code refuses it and the route escalates, the larger route's, asked once.

        Refused: an answer its sentences do not hold (``unsupported``), or output that broke its schema
        after the service's regeneration (``invalid_output``). The refused call's usage is counted and
        returned in ``escalation``. Failures are ApiErrors.
        """
        route = self.routes.get(p.body.model or self.route)
        bigger = self.routes.escalation(route)
        first: api.AnswerResponse | None = None
        try:
            first = await self._write(p, deadline, route)
            reason = "unsupported" if first.reason == "unsupported" else None
        except StructuredFailed as err:
            if bigger is None or err.reason not in ("schema_violation", "invalid_output"):
                ANSWERS.labels("failed").inc()
                raise failed(err) from None
            reason = "invalid_output"
        if reason is None or bigger is None:
            assert first is not None
            return first
        ESCALATIONS.labels("answers", reason).inc()
        note(escalated_from=route.name)
        try:
            again = await self._write(p, deadline, bigger)
        except StructuredFailed as err:
            ANSWERS.labels("failed").inc()
            raise failed(err) from None
        return again.model_copy(update={"escalation": Escalation(route=route.name, reason=reason,  # type: ignore[arg-type]
                                                                 usage=first.usage if first else None)})

    def response(self, p: Prepared, value: object, call: StructuredStream | None,
                 route: str | None = None) -> api.AnswerResponse:
        """The checked answer, or ``answerable: false`` with its reason (the model proposes, code checks).

        An answer the model calls answerable is kept only when :func:`support.check` finds it in the
        sentences it names and those sentences cover the question (else ``reason: unsupported``).
        """
        answer, answerable, verdict, check_ms = "", False, None, None
        if isinstance(value, dict) and value.get("answerable") is True and str(value.get("answer", "")).strip():
            proposed = support.clean(str(value["answer"]))
            t = time.perf_counter()
            titles = {q.n: str(q.payload.get("title") or "") for q in p.passages}
            verdict = support.check(proposed, list(value.get("evidence") or []), p.sentences, p.rewrite.query, titles,
                                    asked=p.body.question)
            check_ms = round((time.perf_counter() - t) * 1e3, 3)
            answerable = verdict.supported
            answer = proposed if answerable else ""
            if not answerable and verdict.reason:
                REFUSED_BY.labels(verdict.reason).inc()
        if answerable:
            reason = "answered"
        elif verdict is not None:
            reason = "unsupported"
        elif not p.passages:
            reason = "no_passages"
        else:
            reason = "not_relevant" if p.relevance is not None and not p.relevance.relevant else "not_in_passages"
        ANSWERS.labels(reason).inc()
        removed = verdict.removed if verdict is not None else 0
        if removed:
            CITATIONS_REMOVED.inc(removed)
        by_n = {q.n: q for q in p.passages}
        cited = verdict.evidence if verdict is not None and answerable else []
        usage = usage_of(call.usage) if call is not None and call.usage is not None else None
        note(collection=p.body.collection, answerable=answerable, passages=len(p.passages), citations=len(cited),
             citations_removed=removed, rewrite=p.rewrite.status, degraded=p.found.degraded, answer_reason=reason)
        return api.AnswerResponse(
            answerable=answerable, answer=answer, reason=reason, citations_removed=removed,
            citations=[api.Citation(n=c.passage, sentence=c.k, id=c.doc_id, start=c.start, end=c.end, text=c.text,
                                    payload=by_n[c.passage].payload, page=page_of(by_n[c.passage].payload, c.start))
                       for c in cited],
            support=None if verdict is None else api.AnswerSupport(
                check=verdict.reason or "supported", answer_terms=verdict.answer_terms,
                question_terms=verdict.question_terms, numbers_missing=verdict.missing_numbers),
            relevance=None if p.relevance is None else api.AnswerRelevance(
                score=p.relevance.score, threshold=p.relevance.threshold, features=p.relevance.features),
            passages=[api.AnswerPassage(n=q.n, id=q.doc_id, start=q.start, end=q.end, text=q.text, score=q.score,
                                        dense_score=q.dense_score, payload=q.payload) for q in p.passages],
            dropped=p.dropped, rewrite=p.rewrite, search_mode=p.found.mode, degraded=p.found.degraded, usage=usage,
            answered_by=route,
            timings=api.AnswerTimings(rewrite_ms=p.rewrite.ms, search_ms=round(p.search_ms, 3),
                                      llm_ttft_ms=usage.ttft_ms if usage else None,
                                      total_ms=round((time.perf_counter() - p.start) * 1e3, 3), check_ms=check_ms))

    async def answer(self, body: api.AnswerRequest, deadline: Deadline) -> api.AnswerResponse:
        """The whole answer (an answer breaking its schema is regenerated once by the service)."""
        return await self.finish(await self.prepare(body, deadline), deadline)

    async def finish(self, p: Prepared | Served, deadline: Deadline) -> api.AnswerResponse:
        """The answer to a prepared question: the cache's, a refusal without passages, or the checked one."""
        if isinstance(p, Served):
            return p.response
        if not p.passages or (p.relevance is not None and not p.relevance.relevant):
            return self.response(p, None, None)  # nothing the model could answer from: it is not asked
        out = await self.written(p, deadline)
        await self.store(p, out)
        return out

    async def events(self, p: Prepared | Served, deadline: Deadline) -> AsyncGenerator[bytes, None]:
        """``passages`` at once; once the answer is written and checked, its text as one ``delta``; ``done``.

        Nothing is streamed as the answer before it passed the checks: an unsupported answer is never
        shown, only ``done`` with ``answerable: false``. Or ``error``. An answer from the cache is the
        same three events at once.
        """
        send = api.STREAM.send
        if isinstance(p, Served):
            out = p.response
            yield send("passages", api.PassagesEvent(
                query=out.rewrite.query, rewrite=out.rewrite, search_mode=out.search_mode, degraded=out.degraded,
                passages=[api.PassageShown(n=q.n, id=q.id, start=q.start, end=q.end, text=q.text)
                          for q in out.passages]))
            yield send("delta", TextDelta(text=out.answer))
            yield send("done", out)
            return
        yield send("passages", api.PassagesEvent(
            query=p.rewrite.query, rewrite=p.rewrite, search_mode=p.found.mode, degraded=p.found.degraded,
            passages=[api.PassageShown(n=q.n, id=q.doc_id, start=q.start, end=q.end, text=q.text)
                      for q in p.passages]))
        if not p.passages or (p.relevance is not None and not p.relevance.relevant):
            yield send("done", self.response(p, None, None))
            return
        try:
            out = await self.written(p, deadline)
        except ApiError as err:
            yield api.STREAM.error(err)
            return
        await self.store(p, out)
        if out.answerable:
            yield send("delta", TextDelta(text=out.answer))
        yield send("done", out)


def _span(h: SearchHit) -> tuple[int, int] | None:
    """The passage search matched in a document stored as passages (None: a whole document)."""
    p = h.passage
    return (p.start, p.end) if p is not None and p.passages > 1 else None
