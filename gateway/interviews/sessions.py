"""Mock interview sessions (seed 001): questions from the résumé and the posting, follow-ups, a report.

The model writes each question (the ``interview_question`` task, with the last three question-answer
pairs and every question asked so far in its prompt) and scores each answer (``answer_feedback``);
code decides everything else:

- **follow-up rule**: an answer to a main question shorter than ``follow_up_below`` characters
  (white space stripped) gets one follow-up question on it; a follow-up never gets another. The
  session ends when its last main question (and that follow-up, if any) is answered.
- **prepared questions**: as soon as a question is served, the next main question is written in the
  background (``prep:<main>``), so an answer that needs no follow-up usually finds it ready. A
  prepared question is served once: the turn it fills is claimed with HSETNX and the preparation
  removed.
- **state**: one Redis hash per session (``interview:<id>``, TTL ``ttl_s``, renewed by each write):
  ``meta``, ``q:<turn>``, ``a:<turn>``, ``prep:<main>``. Answers and questions are claimed with HSETNX,
  so two gateway instances can never record two answers to one turn or two questions for one turn;
  an instance that dies after recording an answer loses nothing (the same answer sent again, to any
  instance, gets the next question; a different one is refused with 409).
- **scores ready before the report**: as soon as an answer is recorded (and its next question chosen),
  ``answer_feedback`` scores it in the background — one at a time per instance, each taking a slot of the
  one LLM cap — and the score is stored with the turn (``s:<turn>``, claimed once, so any instance's
  score serves every instance). A score not stored when the session is reported (this instance's
  scoring still queued, another instance gone) is written by the report itself, as a task that finishes
  and stores its score even if the client leaves.
- **report**: the stored scores gathered (temperature 0: the same answers score the same), the means,
  the strongest and weakest criterion and an overall grade by code; ``/report:stream`` sends each scored
  answer as it is ready, then the summary.

No question or answer text reaches a log line, a span or a metric label.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import uuid

from prometheus_client import Counter

from gateway.access.context import owner
from gateway.http.admission import Slots
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.interviews import protocol as api
from gateway.interviews.session import Session, grade, late, state_unavailable
from gateway.tasks.protocol import TaskRequest
from gateway.tasks.serving import Tasks
from gateway.tasks.store import KeyValue, StoreUnavailable, session_hash
from gateway.usage.accounting import charged_later

log = logging.getLogger(__name__)
QUESTIONS = Counter("mesh_gateway_interview_questions", "interview questions served, by how they were written",
                    ["source"])
PREPARED = Counter("mesh_gateway_interview_preparations", "background question preparations by outcome", ["outcome"])
for _source in ("prepared", "generated", "follow_up"):
    QUESTIONS.labels(_source)
for _outcome in ("ready", "failed", "skipped"):
    PREPARED.labels(_outcome)
QUESTION_TASK = "interview_question"
FEEDBACK_TASK = "answer_feedback"
CRITERIA = {"accuracy_logic": "정확성·논리", "relevance": "질문 적합성", "expression": "표현",
            "practical_depth": "실무 깊이"}
ID = r"^[0-9a-f]{32}$"
SCORED = Counter("mesh_gateway_interview_scores", "interview answers scored, by when", ["when"])
for _when in ("ahead", "at_report", "failed"):
    SCORED.labels(_when)


class Interviews:
    """``/v1/interviews``: sessions on the task runner and the shared store."""

    def __init__(self, tasks: Tasks, store: KeyValue, *, ttl_s: int, follow_up_below: int,
                 prepare: bool = True, slots: Slots | None = None, score_ahead: bool = True) -> None:
        self.tasks = tasks
        # A preparation takes a slot of the one LLM cap when one is free, else it is skipped (the question
        # is then written when the answer arrives).
        self.slots = slots or Slots("llm", 0)
        self.store = store
        self.ttl_s = ttl_s
        self.follow_up_below = follow_up_below
        self.prepare = prepare
        self.score_ahead = score_ahead
        self._pending: dict[tuple[str, int], asyncio.Task] = {}
        self._scoring: dict[tuple[str, int], asyncio.Task] = {}  # background scorings, queued or running
        self._running: set[tuple[str, int]] = set()  # of those, the one holding the scoring turn
        self._direct: dict[tuple[str, int], asyncio.Task] = {}  # scorings a report started itself
        self._one_at_a_time = asyncio.Lock()

    @staticmethod
    def key(sid: str) -> str:
        """The session's hash."""
        return f"interview:{sid}"

    async def _load(self, sid: str) -> Session:
        try:
            fields = await session_hash(self.store, self.key(sid), sid)
        except StoreUnavailable as err:
            raise state_unavailable(err) from None
        if not fields or "meta" not in fields:
            raise ApiError(404, "interview_not_found", "no such interview (it may have expired)")
        return Session.parse(sid, fields)

    async def _claim(self, sid: str, name: str, value: dict) -> bool:
        try:
            return await self.store.hsetnx(self.key(sid), name, json.dumps(value, ensure_ascii=False), self.ttl_s)
        except StoreUnavailable as err:
            raise state_unavailable(err) from None

    async def _expires(self, sid: str) -> int:
        try:
            return await self.store.ttl(self.key(sid))
        except StoreUnavailable:
            return self.ttl_s

    async def _write(self, s: Session, follow_up: bool, deadline: Deadline) -> dict:
        """The model's next question for ``s`` (its history and asked questions in the prompt)."""
        history = s.history()
        recent = {h["question"] for h in history}  # shown with their answers: not listed twice (issue 63)
        value = {"resume": s.meta["resume"], "posting": s.meta["posting"], "kind": s.meta["kind"],
                 "history": history, "asked": [q for q in s.asked() if q not in recent], "follow_up": follow_up}
        request = TaskRequest(input=value, model=s.meta.get("model"), cache=False, session_id=s.id)
        run = await self.tasks.prepare(QUESTION_TASK, request)
        response = await self.tasks.run(run, deadline)
        return {"text": response.result["question"].strip(), "topic": response.result["topic"].strip()}

    def _question(self, raw: dict) -> api.Question:
        return api.Question(turn=raw["turn"], text=raw["text"], topic=raw["topic"], follow_up=raw["follow_up"],
                            main=raw["main"], source=raw["source"])

    async def _turn(self, s: Session, question: dict | None) -> api.InterviewTurn:
        return api.InterviewTurn(id=s.id, status="in_progress" if question else "finished",
                                 question=self._question(question) if question else None,
                                 answered=len(s.answers), expires_in_s=await self._expires(s.id))

    # -- preparation ---------------------------------------------------------------------------------------

    def _prepare_next(self, s: Session, main: int) -> None:
        """Write main question ``main`` in the background unless it exists, is prepared or is being prepared."""
        if not self.prepare or main > s.meta["questions"] or main in s.prepared or (s.id, main) in self._pending:
            return
        if any(q["main"] == main and not q["follow_up"] for q in s.questions.values()):
            return
        self._pending[(s.id, main)] = asyncio.create_task(charged_later(self._prepared(s.id, main)))

    async def _prepared(self, sid: str, main: int) -> None:
        if not await self.slots.try_acquire():
            PREPARED.labels("skipped").inc()
            self._pending.pop((sid, main), None)
            return
        try:
            s = await self._load(sid)
            question = await self._write(s, False, Deadline(self.tasks.get(QUESTION_TASK).spec.deadline_s))
            await self.store.hsetnx(self.key(sid), f"prep:{main}", json.dumps(question, ensure_ascii=False),
                                    self.ttl_s)
            PREPARED.labels("ready").inc()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - a preparation that fails is written when the answer comes
            PREPARED.labels("failed").inc()
            log.warning("interview question not prepared (%s); it is written when the answer arrives",
                        type(err).__name__)
        finally:
            self.slots.release()
            self._pending.pop((sid, main), None)

    async def _ready(self, s: Session, main: int, deadline: Deadline) -> dict | None:
        """The prepared main question ``main`` (waiting for this instance's preparation in flight), or None."""
        if main in s.prepared:
            return s.prepared[main]
        pending = self._pending.get((s.id, main))
        if pending is not None:
            try:
                await asyncio.wait_for(asyncio.shield(pending), deadline.check())
            except TimeoutError:
                return None
        return (await self._load(s.id)).prepared.get(main)  # ready since the read, here or on another instance

    # -- scores ---------------------------------------------------------------------------------------------

    def _score_later(self, s: Session, turn: int) -> None:
        """Score the answer to ``turn`` in the background unless it is scored or being scored here."""
        key = (s.id, turn)
        if not self.score_ahead or turn in s.scores or key in self._scoring or key in self._direct:
            return
        self._scoring[key] = asyncio.create_task(charged_later(self._score_ahead(s.id, turn)))

    async def _score_ahead(self, sid: str, turn: int) -> None:
        key = (sid, turn)
        try:
            async with self._one_at_a_time:  # one scoring at a time per instance
                if key in self._direct or not await self.slots.acquire(600.0):
                    return
                self._running.add(key)
                try:
                    s = await self._load(sid)
                    if turn not in s.scores:
                        await self._score(s, turn, True, Deadline(self.tasks.get(FEEDBACK_TASK).spec.deadline_s))
                        SCORED.labels("ahead").inc()
                finally:
                    self.slots.release()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - the report scores what is missing
            SCORED.labels("failed").inc()
            log.warning("interview answer not scored ahead (%s); the report scores it", type(err).__name__)
        finally:
            self._running.discard(key)
            self._scoring.pop(key, None)

    async def _score(self, s: Session, turn: int, cache: bool, deadline: Deadline) -> dict:
        """Score one answer and store the score with its turn (the first stored wins, on any instance)."""
        q = s.questions[turn]
        request = TaskRequest(input={"question": q["text"], "answer": s.answers[turn]}, model=s.meta.get("model"),
                              cache=cache, session_id=s.id)
        response = await self.tasks.run(await self.tasks.prepare(FEEDBACK_TASK, request), deadline)
        stored = {"result": response.result, "cached": response.cached}
        if cache and not await self._claim(s.id, f"s:{turn}", stored):
            stored = (await self._load(s.id)).scores.get(turn, stored)  # another instance stored one first
        s.scores[turn] = stored
        return stored

    async def _ready_score(self, s: Session, turn: int, cache: bool, deadline: Deadline) -> dict:
        """The turn's score: stored, being written here, or written now (as a task the client cannot cancel)."""
        key = (s.id, turn)
        if cache and turn in s.scores:
            return s.scores[turn]
        if cache and key in self._running:
            await asyncio.wait_for(asyncio.shield(self._scoring[key]), deadline.check())
            s.scores.update((await self._load(s.id)).scores)
            if turn in s.scores:
                return s.scores[turn]
        task = self._direct.get(key) if cache else None
        if task is None:
            # Counted for this caller even when the report's deadline passes and the scoring goes on.
            task = asyncio.create_task(charged_later(self._score(s, turn, cache, deadline)))
            if cache:
                self._direct[key] = task
                task.add_done_callback(lambda _t: self._direct.pop(key, None))
            SCORED.labels("at_report").inc()
        return await asyncio.wait_for(asyncio.shield(task), deadline.check())

    # -- the routes ----------------------------------------------------------------------------------------

    async def start(self, body: api.StartInterview, deadline: Deadline) -> api.InterviewTurn:
        """A new session and its first question."""
        sid = uuid.uuid4().hex
        meta = {"resume": body.resume, "posting": body.posting, "kind": body.kind, "questions": body.questions,
                "model": body.model, "owner": owner()}
        s = Session(sid, meta)
        first = {**await self._write(s, False, deadline), "turn": 1, "main": 1, "follow_up": False,
                 "source": "generated"}
        await self._claim(sid, "meta", meta)
        await self._claim(sid, "q:1", first)
        s.questions[1] = first
        QUESTIONS.labels("generated").inc()
        self._prepare_next(s, 2)
        return await self._turn(s, first)

    async def answer(self, sid: str, body: api.Answer, deadline: Deadline) -> api.InterviewTurn:
        """Record the answer to the current turn (once) and return the next question."""
        s = await self._load(sid)
        turn = body.turn or s.last
        if turn not in s.questions:
            raise ApiError(409, "turn_not_asked", f"turn {turn} has not been asked; the current turn is {s.last}")
        if turn not in s.answers and not await self._claim(sid, f"a:{turn}", {"text": body.answer}):
            s = await self._load(sid)  # another request recorded an answer to this turn first
        if turn in s.answers and s.answers[turn] != body.answer:
            if s.finished(self.follow_up_below):
                raise ApiError(409, "interview_finished", "the interview is finished; POST .../report scores it")
            raise ApiError(409, "already_answered", f"turn {turn} is already answered (the current turn is "
                                                    f"{s.last}); resending the same answer is safe")
        s.answers[turn] = body.answer
        question = await self._next(s, turn, deadline)  # the next question first: the person waits for it
        self._score_later(s, turn)
        return await self._turn(s, question)

    async def _next(self, s: Session, turn: int, deadline: Deadline) -> dict | None:
        if turn + 1 in s.questions:  # the same answer sent again: the question already chosen
            return s.questions[turn + 1]
        plan = s.plan_after(turn, self.follow_up_below)
        if plan is None:
            return None
        follow_up, main = plan
        text = None if follow_up else await self._ready(s, main, deadline)
        source = "prepared" if text else "generated"
        if text is None:
            text = await self._write(s, follow_up, deadline)
        question = {"text": text["text"], "topic": text["topic"], "turn": turn + 1, "main": main,
                    "follow_up": follow_up, "source": source}
        if not await self._claim(s.id, f"q:{turn + 1}", question):
            return (await self._load(s.id)).questions[turn + 1]  # another instance chose it first
        if source == "prepared":
            try:
                await self.store.hdel(self.key(s.id), f"prep:{main}")
            except StoreUnavailable:
                pass  # an unused preparation expires with the session
            s.prepared.pop(main, None)
        QUESTIONS.labels("follow_up" if follow_up else source).inc()
        s.questions[turn + 1] = question
        self._prepare_next(s, main + 1)
        return question

    async def state(self, sid: str) -> api.InterviewState:
        """The session as stored."""
        s = await self._load(sid)
        turns = [api.QuestionAnswered(question=self._question(s.questions[n]), answer=s.answers.get(n))
                 for n in sorted(s.questions)]
        mains = [q["main"] for q in s.questions.values()]
        return api.InterviewState(id=sid, status="finished" if s.finished(self.follow_up_below) else "in_progress",
                                  kind=s.meta["kind"], questions=s.meta["questions"], turns=turns,
                                  prepared=max(mains, default=0) + 1 in s.prepared,
                                  expires_in_s=await self._expires(sid), scored=len(s.scores))

    async def report(self, sid: str, body: api.ReportRequest, deadline: Deadline) -> api.InterviewReport:
        """Every answer's score (stored ahead, or written now); means, strongest and weakest, grade by code."""
        s, turns = await self._answered(sid)
        try:
            scored = [await self._scored(s, n, body.cache, deadline) for n in turns]
        except TimeoutError:
            raise late() from None
        return self._summary(s, scored)

    async def report_events(self, sid: str, body: api.ReportRequest, deadline: Deadline):
        """``answer`` events in turn order as each score is ready, then ``report``; or ``error``."""
        try:
            s, turns = await self._answered(sid)
            scored = []
            for n in turns:
                scored.append(await self._scored(s, n, body.cache, deadline))
                yield api.REPORT_STREAM.send("answer", scored[-1])
            yield api.REPORT_STREAM.send("report", self._summary(s, scored))
        except ApiError as err:
            yield api.REPORT_STREAM.error(err)
        except TimeoutError:
            yield api.REPORT_STREAM.error(late())

    async def _answered(self, sid: str) -> tuple[Session, list[int]]:
        s = await self._load(sid)
        turns = [n for n in sorted(s.answers) if n in s.questions]
        if not turns:
            raise ApiError(409, "no_answers", "the interview has no answer to score yet")
        return s, turns

    async def _scored(self, s: Session, n: int, cache: bool, deadline: Deadline) -> api.ScoredAnswer:
        stored = await self._ready_score(s, n, cache, deadline)
        r, q = stored["result"], s.questions[n]
        return api.ScoredAnswer(
            turn=n, question=q["text"], follow_up=q["follow_up"], overall=r["overall"],
            criteria={c: api.Criterion(score=v["score"], reason=v["reason"]) for c, v in r["criteria"].items()},
            good_points=r["good_points"], improvements=r["improvements"], feedback=r["feedback"],
            cached=stored["cached"])

    def _summary(self, s: Session, scored: list[api.ScoredAnswer]) -> api.InterviewReport:
        means = {c: round(statistics.fmean(a.criteria[c].score for a in scored), 2) for c in CRITERIA}
        strongest = max(CRITERIA, key=lambda c: means[c])
        weakest = min(CRITERIA, key=lambda c: means[c])
        overall = round(statistics.fmean(a.overall for a in scored), 2)
        letter = grade(overall)
        summary = (f"답변 {len(scored)}개의 평균은 10점 만점에 {overall:.1f}점(등급 {letter})입니다. 가장 나은 기준은 "
                   f"{CRITERIA[strongest]}({means[strongest]:.1f}점), 보완할 기준은 "
                   f"{CRITERIA[weakest]}({means[weakest]:.1f}점)입니다.")
        return api.InterviewReport(id=s.id, complete=s.finished(self.follow_up_below), answers=scored,
                                   criteria_mean=means, overall=overall, strongest=strongest, weakest=weakest,
                                   summary=summary, grade=letter)

    async def close(self) -> None:
        """Cancel the preparations in flight (a question not prepared is written when its answer comes)."""
        tasks = [*self._pending.values(), *self._scoring.values(), *self._direct.values()]
        for pending in tasks:
            pending.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
