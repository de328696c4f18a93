"""Post-processing steps a task file may name (``post:``): what code decides after the model wrote its object.

A step takes the model's validated output and the task's input and returns the result, which is
validated against the task's ``result_schema``. Steps hold the parts a model should not decide:
dates resolved against a reference date, skills looked up in the résumé and the match score they
make, a grade that follows the score, an overall score that is the criteria's mean — so the same
output always gives the same result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from services.runtime.korean import dates
from services.runtime.korean.particles import strip_particle


class PostError(ValueError):
    """An input a step cannot use (a bad time zone or reference date): a 400 naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# match score -> grade (a stated scale, not fitted): the lowest score of each grade.
GRADES = (("A", 80), ("B", 60), ("C", 40), ("D", 0))
# The match score's share that is the posting's skills found in the résumé (code); the rest is the
# model's judgement of the experience (a stated split, not fitted).
SKILL_WEIGHT = 0.6
# Words that say how much of a skill is asked for, not which: cut before a skill is looked for.
_SKILL_NOISE = re.compile(r"(?<!\d)\d++\s*+년\s*+(?:이상|이하)?|이상|경험자?|능력|역량|지식|이해(?:도)?|활용|사용|보유|"
                          r"우대|"
                          r"가능자?|숙련(?:자|도)?|실무|필수|관련|및|또는|등")
_SKILL_SPLIT = re.compile(r"(?<!\s)\s*+(?:/|,|·|、|\||\(|\)|그리고)\s*+")
# English names and their Korean spellings (a short stated list: either spelling counts as the skill).
ALIASES = {"java": "자바", "spring": "스프링", "python": "파이썬", "javascript": "자바스크립트",
           "typescript": "타입스크립트",
           "kubernetes": "쿠버네티스", "docker": "도커", "react": "리액트", "kotlin": "코틀린", "swift": "스위프트",
           "linux": "리눅스", "kafka": "카프카", "redis": "레디스", "go": "고언어", "excel": "엑셀", "figma": "피그마",
           "photoshop": "포토샵", "tableau": "태블로", "android": "안드로이드", "pytorch": "파이토치"}
_ALIAS_BACK = {ko: en for en, ko in ALIASES.items()}


def grade_of(score: float) -> str:
    """The grade of a 0-100 match score."""
    return next(g for g, floor in GRADES if score >= floor)


def _compact(text: str) -> str:
    return re.sub(r"[\s\-_.]", "", text.lower())


def _words(skill: str) -> list[str]:
    words = []
    for word in _SKILL_NOISE.sub(" ", skill).split():
        word = strip_particle(word, keep=2)
        if len(word) >= 2 or word.isascii() and word.isalpha():
            words.append(word)
    return words


def _has(text: str, word: str) -> bool:
    w = _compact(word)
    if not w:
        return False
    other = ALIASES.get(w) or _ALIAS_BACK.get(w)
    if w.isascii() and len(w) <= 3:  # "Go", "AWS", "SQL": a whole word, not a piece of another
        return re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", text.lower()) is not None or \
            bool(other and other in _compact(text))
    return w in _compact(text) or bool(other and _compact(other) in _compact(text))


def skills(phrases: list[str]) -> list[str]:
    """The model's skill phrases split (``Java/Spring`` is two) and cleaned, first mention kept."""
    out: list[str] = []
    seen: set[str] = set()
    for phrase in phrases:
        for part in _SKILL_SPLIT.split(str(phrase)):
            name = " ".join(_words(part))
            if name and _compact(name) not in seen:
                seen.add(_compact(name))
                out.append(name)
    return out


def skill_found(resume: str, skill: str) -> bool:
    """True when every word of ``skill`` (noise words cut) is in the résumé (either spelling of an alias)."""
    words = _words(skill)
    return bool(words) and all(_has(resume, w) for w in words)


def match_score(output: dict, value: dict) -> dict:
    """The analysis with the skills checked and the score computed by code.

    The model lists the posting's skills and judges the experience (``experience_fit``, 0-100);
    code keeps the skills the posting names, looks each up in the résumé (found or missing), and
    the match score is ``SKILL_WEIGHT`` x the share found + the rest x the model's judgement; the
    grade follows the score (A >= 80, B >= 60, C >= 40, else D).
    """
    posting, resume = str(value.get("posting", "")), str(value.get("resume", ""))
    asked = [s for s in skills(output.get("required_skills", [])) if skill_found(posting, s)]
    found = [s for s in asked if skill_found(resume, s)]
    missing = [s for s in asked if s not in found]
    fit = int(output["experience_fit"])
    coverage = len(found) / len(asked) if asked else None
    score = round(SKILL_WEIGHT * 100 * coverage + (1 - SKILL_WEIGHT) * fit) if coverage is not None else fit
    return {"match_score": score, "grade": grade_of(score), "skills_found": found, "skills_missing": missing,
            "skill_coverage": round(coverage, 3) if coverage is not None else None, "experience_fit": fit,
            "strengths": output["strengths"], "weaknesses": output["weaknesses"], "summary": output["summary"]}


# An answer shorter than this cannot show practical depth: that criterion is at most SHORT_DEPTH_MAX
# (a stated rule, not fitted: about one sentence).
SHORT_ANSWER_CHARS = 40
SHORT_DEPTH_MAX = 3


def criteria_mean(output: dict, value: dict) -> dict:
    """The evaluation with ``overall`` the mean of its criteria's scores (one decimal), placed after the criteria.

    A short answer (under ``SHORT_ANSWER_CHARS`` characters, spaces aside) has its ``practical_depth``
    capped at ``SHORT_DEPTH_MAX`` first.
    """
    criteria = {name: dict(c) for name, c in output["criteria"].items()}
    answer = re.sub(r"\s", "", str(value.get("answer", "")))
    if "practical_depth" in criteria and len(answer) < SHORT_ANSWER_CHARS:
        criteria["practical_depth"]["score"] = min(int(criteria["practical_depth"]["score"]), SHORT_DEPTH_MAX)
    scores = [float(c["score"]) for c in criteria.values()]
    overall = round(sum(scores) / len(scores), 1) if scores else 0.0
    out: dict = {}
    for key, item in output.items():
        out[key] = criteria if key == "criteria" else item
        if key == "criteria":
            out["overall"] = overall
    return out


DEFAULT_TIMEZONE = "Asia/Seoul"  # the one default of every route that reads dates


def zone(name: str | None) -> ZoneInfo:
    """The IANA time zone ``name`` (the default when none); ValueError naming it when there is no such zone."""
    try:
        return ZoneInfo(name or DEFAULT_TIMEZONE)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):  # "Asia" is a directory: IsADirectoryError
        raise ValueError(f"{name!r} is not an IANA time zone (e.g. {DEFAULT_TIMEZONE}, Europe/Berlin)") from None


def reference(value: dict) -> tuple[date, ZoneInfo]:
    """The input's reference date (default: today in its zone) and time zone (default Asia/Seoul)."""
    try:
        tz = zone(value.get("timezone"))
    except ValueError as err:
        raise PostError("input.timezone", str(err)) from None
    raw = value.get("reference_date")
    if not raw:
        return datetime.now(tz).date(), tz
    try:
        return date.fromisoformat(raw), tz
    except ValueError:
        raise PostError("input.reference_date", f"{raw!r} is not an ISO date (YYYY-MM-DD)") from None


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def quoted(phrase: str, text: str) -> bool:
    """True when ``phrase`` is in ``text`` as written (spaces aside)."""
    return bool(_squeeze(phrase)) and _squeeze(phrase) in _squeeze(text)


_NAME_END = re.compile(r"[\s\[\](){}<>,.:;!?/'\"·]")


def whole_name(name: str, text: str) -> str:
    """The company as the notice writes it: ``네이버`` read from ``네이버웹툰의`` is ``네이버웹툰``.

    The model's name is extended to the end of the word it starts in the notice, a trailing particle cut;
    a name the notice does not hold is kept as the model wrote it.
    """
    at = text.find(name) if name else -1
    if at < 0:
        return name
    end = at + len(name)
    while end < len(text) and not _NAME_END.match(text[end]):
        end += 1
    return strip_particle(text[at:end], keep=len(name))


# A hiring stage's own words, from the task's stage definitions (calendar_parse.yaml): the closed list the
# model chooses from, checked against the notice. 최종 alone names no stage (최종면접 is an interview).
STAGE_WORDS = {"서류": ("서류", "지원서", "입사지원", "서류 접수", "서류 마감"),
               "코딩테스트": ("코딩테스트", "코딩 테스트", "코테", "알고리즘 테스트", "알고리즘테스트"),
               "인적성검사": ("인적성", "적성검사", "인성검사"), "과제": ("과제", "포트폴리오"),
               "면접": ("면접", "인터뷰"),
               "최종발표": ("합격자 발표", "합격 발표", "최종 발표", "최종발표", "결과 발표")}


def event_title(title: str, company: str, stage: str, notice: str) -> str:
    """The model's title when every word of it is the notice's (or the company's); else ``<company> <stage>``.

    A title naming another company ("네이버 1차 면접" for a 카카오 notice: the instructions' example) or words
    the notice does not hold is not shown: code writes one from what it read.
    """
    words = [strip_particle(w) for w in re.findall(r"[^\s\[\](){}<>,.:;!?/'\"·]+", title)]
    if words and all(quoted(w, notice) or quoted(w, company) for w in words):
        return title
    return " ".join(p for p in (company, "" if stage == "기타" else stage) if p) or title


def stage_of(proposed: str, notice: str) -> str:
    """The model's stage when the notice names it by its words (or names none); else the stage the notice names.

    The model's reading stands whenever the notice gives it; it is replaced only when the notice names
    another stage and not the model's (the first one named, its title line first), never by a guess.
    """
    squeezed = _squeeze(notice)
    first = _squeeze(notice.strip().split("\n", 1)[0])

    def named(stage: str, text: str) -> int:
        hits = [text.find(_squeeze(w)) for w in STAGE_WORDS.get(stage, ())]
        return min((h for h in hits if h >= 0), default=-1)

    if proposed in STAGE_WORDS and named(proposed, squeezed) >= 0:
        return proposed
    for text in (first, squeezed):
        found = sorted((at, stage) for stage in STAGE_WORDS if (at := named(stage, text)) >= 0)
        if found:
            return found[0][1]
    return proposed


def calendar_dates(output: dict, value: dict) -> dict:
    """The model's date phrases resolved by code; where they resolve to nothing, the notice's first date phrase.

    The model's start phrase counts only when the notice holds it as written (spaces aside); a phrase
    it rewrote (오전 → 오후) or copied from elsewhere gives way to the notice's first date phrase.
    """
    ref, tz = reference(value)
    notice = str(value.get("text", ""))
    start_text = str(output.get("start_text") or "")
    end_text = str(output.get("end_text") or "")
    found = dates.span(start_text, ref) if start_text else None
    if found is not None and not quoted(start_text[found.start.start:(found.end or found.start).end], notice):
        found = None  # a phrase the notice does not hold (the model rewrote or made it up): the notice decides
    source = "model"
    if found is None:
        spans = dates.scan(notice, ref)
        found, source = (spans[0], "scan") if spans else (None, "none")
        # The phrase shown is the notice's, never one the model wrote that the notice does not hold.
        start_text = notice[found.start.start:found.start.end] if found is not None else ""
        end_text = notice[found.end.start:found.end.end] if found is not None and found.end is not None else ""
    start = end = None
    all_day = True
    if found is not None:
        start = dates.iso(found.start, tz, end_of_day=False)
        end_when = found.end
        if end_text and source == "model":
            end_span = dates.span(end_text, found.start.day)
            if end_span is not None:
                end_when = end_span.end or end_span.start
            else:  # "18시까지": a time alone ends the start's day
                t = dates.when(f"{found.start.day:%Y년 %m월 %d일} {end_text}", ref)
                end_when = t if t is not None and t.at is not None else end_when
        end = dates.iso(end_when, tz, end_of_day=True) if end_when else None
        all_day = found.start.at is None and (end_when is None or end_when.at is None)
    company = whole_name(str(output["company"]), notice)
    stage = stage_of(str(output["stage"]), notice)
    return {"company": company, "stage": stage, "title": event_title(str(output.get("title", "")), company, stage,
                                                                     notice),
            "start": start, "end": end, "all_day": all_day,
            "start_text": start_text, "end_text": end_text,
            "dates_from": source, "reference_date": ref.isoformat(), "timezone": tz.key}


STEPS: dict[str, Callable[[dict, dict], dict]] = {
    "match_score": match_score, "criteria_mean": criteria_mean, "calendar_dates": calendar_dates}

# Input checks of a step, run before the model is called (a bad time zone is a 400 before any work).
CHECKS: dict[str, Callable[[dict], object]] = {"calendar_dates": reference}
