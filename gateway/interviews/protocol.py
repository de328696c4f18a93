"""``/v1/interviews`` REST models (contract v1; fields only ever added)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from gateway.http.models import Strict
from gateway.http.streams import Stream

RESUME = "백엔드 개발자 4년. Java, Spring Boot, MySQL, Redis로 주문 시스템을 운영했습니다."
POSTING = "[백엔드 개발자] 자격: Java/Spring 3년 이상. 우대: 대용량 트래픽 경험."


def not_blank(value: str) -> str:
    """Text with something in it besides white space."""
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class StartInterview(Strict):
    """A new mock interview."""

    resume: str = Field(min_length=1, max_length=8000, examples=[RESUME])
    posting: str = Field(min_length=1, max_length=4000, examples=[POSTING])
    kind: Literal["technical", "personality"] = "technical"
    questions: int = Field(5, ge=1, le=10, description="main questions; a short answer adds one follow-up on it")
    model: str | None = Field(None, min_length=1, max_length=128,
                              description="model route of the session's questions and report (default: the "
                                          "route the `interview` role maps to)")

    _blank = field_validator("resume", "posting")(not_blank)


class Answer(Strict):
    """The candidate's answer to the current question."""

    answer: str = Field(min_length=1, max_length=4000,
                        examples=["주문 API의 캐시를 Redis로 옮겨 응답 시간을 40% 줄였습니다."])
    turn: int | None = Field(None, ge=1, le=100, description="the question answered (from the last response); "
                                                             "resending the same answer to it is safe")

    _blank = field_validator("answer")(not_blank)


class ReportRequest(Strict):
    """How to score the session."""

    cache: bool = Field(True, description="false: score every answer afresh (answer_feedback's cache unused)")


class Question(BaseModel):
    """One question of the session."""

    turn: int = Field(description="1, 2, ... in the order asked")
    text: str
    topic: str
    follow_up: bool = Field(description="a follow-up on the previous answer (rule: that answer, to a main "
                                        "question, was shorter than --interview-follow-up-below-chars)")
    main: int = Field(description="the main question it belongs to (1..questions)")
    source: Literal["generated", "prepared"] = Field(description="prepared: written in the background while the "
                                                                 "previous question was being answered")


class QuestionAnswered(BaseModel):
    """A question and, once given, its answer."""

    question: Question
    answer: str | None = None


class InterviewTurn(BaseModel):
    """What to ask now."""

    id: str
    status: Literal["in_progress", "finished"]
    question: Question | None = Field(description="the question to answer now; null when the session is finished")
    answered: int = Field(description="answers recorded so far")
    expires_in_s: int


class InterviewState(BaseModel):
    """A session as stored."""

    id: str
    status: Literal["in_progress", "finished"]
    kind: str
    questions: int
    turns: list[QuestionAnswered]
    prepared: bool = Field(description="the next main question is prepared and waiting")
    expires_in_s: int
    scored: int | None = Field(None, description="answers already scored (in the background as they came): a "
                                                 "report asked for now only waits for the rest")


class Criterion(BaseModel):
    """One criterion's score."""

    score: int
    reason: str


class ScoredAnswer(BaseModel):
    """One answer, scored by the answer_feedback task."""

    turn: int
    question: str
    follow_up: bool
    criteria: dict[str, Criterion]
    overall: float
    good_points: list[str]
    improvements: list[str]
    feedback: str
    cached: bool


class InterviewReport(BaseModel):
    """Every answer scored per criterion, and the means (by code)."""

    id: str
    complete: bool = Field(description="every question of the session was answered")
    answers: list[ScoredAnswer]
    criteria_mean: dict[str, float]
    overall: float = Field(description="the answers' overall scores' mean (1-10)")
    strongest: str = Field(description="the criterion with the highest mean")
    weakest: str = Field(description="the criterion with the lowest mean")
    summary: str
    grade: str | None = Field(None, description="by code from `overall`: A ≥ 8.5, B ≥ 7.0, C ≥ 5.5, D ≥ 4.0, else F")


REPORT_STREAM = Stream({"answer": ScoredAnswer, "report": InterviewReport},
                       description="one `answer` per turn in order as its score is ready, then `report`; or `error`")
