"""``/v1/interviews``: start a mock interview, answer its questions, read it, score it."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from gateway.http.deadline import TIMEOUT_HEADER, parse_timeout
from gateway.http.errors import documented
from gateway.interviews import protocol as api
from gateway.interviews.sessions import FEEDBACK_TASK, QUESTION_TASK, Interviews
from gateway.reasoning.router import SSE_HEADERS

router = APIRouter(tags=["interviews"])
ERRORS = documented(400, 401, 404, 409, 413, 429, 502, 503, 504)


def _interviews(request: Request) -> Interviews:
    return request.app.state.mesh.interviews


def _deadline(request: Request, task: str, runs: int = 1):
    """The header's deadline, else the task's own deadline per run (at most 600 s)."""
    seconds = _interviews(request).tasks.get(task).spec.deadline_s * runs
    return parse_timeout(request.headers.get(TIMEOUT_HEADER), int(min(600.0, seconds) * 1000))


@router.post("/v1/interviews", status_code=201, response_model=api.InterviewTurn, responses=ERRORS)
async def start_interview(body: api.StartInterview, request: Request):
    """Start a session: its first question (written by the `interview_question` task).

    The next main question is prepared in the background at once. State lives in the gateway's Redis
    (`--redis-url`; without one, in this instance only) for `--interview-ttl-s`, renewed by every write.
    """
    return await _interviews(request).start(body, _deadline(request, QUESTION_TASK))


@router.post("/v1/interviews/{interview_id}/answers", response_model=api.InterviewTurn, responses=ERRORS)
async def answer_question(interview_id: str, body: api.Answer, request: Request):
    """Record the answer to the current turn and return the next question (null when the session is finished).

    A short answer to a main question (under `--interview-follow-up-below-chars`) gets one follow-up;
    otherwise the next main question, usually prepared while the candidate answered. Each turn takes
    one answer: the same answer sent again returns the same next question; another one is 409
    `already_answered` (`interview_finished` once the session is over).
    """
    return await _interviews(request).answer(interview_id, body, _deadline(request, QUESTION_TASK))


@router.get("/v1/interviews/{interview_id}", response_model=api.InterviewState, responses=ERRORS)
async def get_interview(interview_id: str, request: Request):
    """The session: every question with its answer, whether the next one is prepared, and its time left."""
    return await _interviews(request).state(interview_id)


@router.post("/v1/interviews/{interview_id}/report:stream", responses={**ERRORS, **api.REPORT_STREAM.doc()})
async def report_interview_stream(interview_id: str, request: Request, body: api.ReportRequest | None = None):
    """The report as server-sent events (declared before `/report`): each scored answer as it is ready, then the rest.

    1. `answer`: one ScoredAnswer per answered turn, in turn order; answers scored in the background while
       the session went on are sent at once, a missing score is written now.
    2. `report`: the whole InterviewReport (means, strongest and weakest criterion, grade, summary).

    Or `error` (the ErrorBody shape). A client that leaves cancels no scoring: each score written is kept.
    """
    interviews = _interviews(request)
    runs = max(1, len((await interviews.state(interview_id)).turns))
    dl = _deadline(request, FEEDBACK_TASK, runs)
    await interviews.state(interview_id)  # an unknown session is a plain 404
    return StreamingResponse(interviews.report_events(interview_id, body or api.ReportRequest(), dl),
                             media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/v1/interviews/{interview_id}/report", response_model=api.InterviewReport, responses=ERRORS)
async def report_interview(interview_id: str, request: Request, body: api.ReportRequest | None = None):
    """Every answer's score per criterion (the `answer_feedback` task, temperature 0), summarised by code.

    Answers are scored in the background as soon as they are recorded, so a report asked for after the
    last answer's score only gathers; a score still missing is written now. 409 `no_answers` before the
    first answer; a report of an unfinished session says `complete: false`.
    """
    interviews = _interviews(request)
    runs = max(1, len((await interviews.state(interview_id)).turns))
    return await interviews.report(interview_id, body or api.ReportRequest(), _deadline(request, FEEDBACK_TASK, runs))
