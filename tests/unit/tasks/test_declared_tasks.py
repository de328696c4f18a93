"""Declared tasks without a model: Korean dates resolved by code, task files checked, post steps, the store."""

from __future__ import annotations

import asyncio
from datetime import date, time
from pathlib import Path

import pytest
import yaml

from gateway.tasks.store import MemoryKeyValue
from services.runtime.korean import dates
from services.runtime.tasks import post
from services.runtime.tasks.spec import BUILTIN_DIR, TaskFileError, load_file, load_tasks

REF = date(2026, 12, 4)  # a Friday


@pytest.mark.parametrize(("phrase", "day", "at"), [
    ("다음 주 화요일 오후 3시", date(2026, 12, 8), time(15, 0)),
    ("이번 주 금요일", date(2026, 12, 4), None),
    ("금요일", date(2026, 12, 4), None),
    ("화요일 10시", date(2026, 12, 8), time(10, 0)),
    ("내일 오전 10시 30분", date(2026, 12, 5), time(10, 30)),
    ("모레 정오", date(2026, 12, 6), time(12, 0)),
    ("3일 후", date(2026, 12, 7), None),
    ("12월 10일(목) 3시", date(2026, 12, 10), time(15, 0)),
    ("1/8(금) 14:00", date(2027, 1, 8), time(14, 0)),
    ("2027.01.05 09:30", date(2027, 1, 5), time(9, 30)),
    ("11월 20일", date(2026, 11, 20), None),  # within the 60 days back
    ("3월 2일", date(2027, 3, 2), None),
    ("저녁 7시", None, None),
    ("이번 달 말까지", date(2026, 12, 31), None),
    ("월말", date(2026, 12, 31), None),
    ("다음 달 초 오전 10시", date(2027, 1, 1), time(10, 0)),
    ("2월 말", date(2027, 2, 28), None),
    ("말씀드린 대로", None, None),
    ("12월 12일 토요일 오전 9시", date(2026, 12, 12), time(9, 0)),  # a weekday between the date and its time
    ("2026. 12. 15. (화) 14:00", date(2026, 12, 15), time(14, 0)),
])
def test_korean_date_phrases_resolve_against_the_reference_date(phrase, day, at):
    found = dates.span(phrase, REF)
    if day is None:
        assert found is None
        return
    assert found is not None and found.start.day == day and found.start.at == at


def test_a_weekday_that_fits_no_nearby_year_is_taken_for_a_typo():
    found = dates.span("3/15(금)", REF)  # 2027-03-15 is a Monday; 2030 would be the next Friday
    assert found is not None and found.start.day == date(2027, 3, 15)


def test_ranges_end_on_their_own_date_or_the_starts():
    both = dates.span("2027년 1월 5일 ~ 1월 9일 18시까지", REF)
    assert both.start.day == date(2027, 1, 5) and both.end.day == date(2027, 1, 9) and both.end.at == time(18, 0)
    same_day = dates.span("12월 10일 오후 2시~4시", REF)
    assert same_day.start.at == time(14, 0) and same_day.end.day == date(2026, 12, 10)
    assert same_day.end.at == time(16, 0)


def test_calendar_dates_resolves_the_models_phrases_and_falls_back_to_the_notice():
    value = {"text": "[카카오] 1차 면접 안내: 다음 주 화요일 오후 3시", "reference_date": "2026-12-04",
             "timezone": None}
    output = {"company": "카카오", "stage": "면접", "title": "1차 면접", "start_text": "다음 주 화요일 오후 3시",
              "end_text": ""}
    out = post.calendar_dates(output, value)
    assert out["start"] == "2026-12-08T15:00:00+09:00" and out["end"] is None and not out["all_day"]
    assert out["dates_from"] == "model" and out["timezone"] == "Asia/Seoul"
    scanned = post.calendar_dates({**output, "start_text": "곧"}, value)  # the model's phrase names no date
    assert scanned["start"] == "2026-12-08T15:00:00+09:00" and scanned["dates_from"] == "scan"
    until = post.calendar_dates({**output, "start_text": "12월 7일 10시", "end_text": "18시까지"},
                                {**value, "text": "[카카오] 과제 전형: 12월 7일 10시 ~ 18시까지"})
    assert until["end"] == "2026-12-07T18:00:00+09:00"
    with pytest.raises(post.PostError) as bad:
        post.reference({"timezone": "Mars/Olympus"})
    assert bad.value.field == "input.timezone"


def test_grade_follows_the_score_and_overall_is_the_criteria_mean():
    assert [post.grade_of(s) for s in (100, 80, 79.9, 60, 40, 39, 0)] == ["A", "A", "B", "B", "C", "D", "D"]
    names = ("accuracy_logic", "relevance", "expression", "practical_depth")
    crit = {k: {"score": s, "reason": "r"} for k, s in zip(names, (7, 8, 6, 8), strict=True)}
    long_answer = ("프로세스는 운영체제가 자원을 할당하는 단위이고 스레드는 그 안에서 실행되는 흐름입니다. "
                   "스레드는 스택만 따로 갖습니다.")
    out = post.criteria_mean({"criteria": crit, "summary": "s"}, {"answer": long_answer})
    assert out["overall"] == 7.2 and list(out) == ["criteria", "overall", "summary"]
    short = post.criteria_mean({"criteria": crit, "summary": "s"}, {"answer": "잘 모르겠습니다."})
    assert short["criteria"]["practical_depth"]["score"] == post.SHORT_DEPTH_MAX and short["overall"] == 6.0
    assert crit["practical_depth"]["score"] == 8  # the model's output is not changed in place


def test_the_match_score_is_the_share_of_the_postings_skills_found_and_the_models_judgement():
    posting = "[백엔드 개발자] 자격: Java/Spring 3년 이상, RDBMS 설계 경험. 우대: Kafka, AWS, 대용량 트래픽 경험."
    resume = "백엔드 개발자 4년. 자바, Spring Boot, MySQL로 주문 시스템을 운영했습니다. AWS에서 배포했습니다."
    output = {"required_skills": ["Java/Spring 3년 이상", "RDBMS 설계 경험", "Kafka", "AWS", "Rust"],
              "experience_fit": 80, "strengths": ["s"], "weaknesses": ["w"], "summary": "요약"}
    out = post.match_score(output, {"resume": resume, "posting": posting})
    # Rust is not in the posting: dropped; 자바 is Java's Korean spelling.
    assert out["skills_found"] == ["Java", "Spring", "AWS"] and out["skills_missing"] == ["RDBMS 설계", "Kafka"]
    assert out["skill_coverage"] == 0.6 and out["match_score"] == round(0.6 * 60 + 0.4 * 80) == 68
    assert out["grade"] == "B"
    nothing = post.match_score({**output, "required_skills": []}, {"resume": resume, "posting": posting})
    assert nothing["match_score"] == 80 and nothing["skill_coverage"] is None
    assert post.skill_found("Go와 gRPC로 서버를 만들었습니다", "Go") and not post.skill_found("Google 검색", "Go")


def test_the_shipped_tasks_load_with_their_examples():
    tasks = load_tasks([BUILTIN_DIR])
    assert set(tasks) == {"resume_analysis", "answer_feedback", "calendar_parse", "interview_question",
                          "spec_delta"}
    for task in tasks.values():
        assert task.spec.sampling.temperature == 0 and task.spec.sampling.seed is not None
        for example in task.spec.examples:
            system, prompt = task.render(example)
            assert system and prompt and "{{" not in prompt


def _write(tmp_path: Path, stem: str, **changes) -> Path:
    raw = yaml.safe_load((BUILTIN_DIR / "calendar_parse.yaml").read_text(encoding="utf-8"))
    raw.update(changes)
    for key, value in list(raw.items()):
        if value is None:
            del raw[key]
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize(("changes", "field"), [
    ({"version": 0}, "version"),
    ({"colour": "blue"}, "colour"),
    ({"name": "other"}, "name"),
    ({"output_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "output_schema.properties.a.type"),
    ({"input_schema": {"type": "array"}}, "input_schema.type"),
    ({"prompt": "{{ texts }}"}, "prompt"),
    ({"system": "{% if %}"}, "system"),
    ({"post": "nothing"}, "post"),
    ({"examples": [{"text": ""}]}, "examples[0].text"),
    ({"sampling": {"temperature": 5}}, "sampling.temperature"),
])
def test_a_bad_task_file_is_one_line_naming_the_file_and_the_field(tmp_path, changes, field):
    path = _write(tmp_path, "calendar_parse", **changes)
    with pytest.raises(TaskFileError) as err:
        load_file(path)
    message = str(err.value)
    assert message.startswith(f"calendar_parse.yaml: {field}: ") and "\n" not in message


def test_a_name_declared_twice_and_a_missing_directory_are_refused(tmp_path):
    _write(tmp_path, "calendar_parse")
    with pytest.raises(TaskFileError, match="declared twice"):
        load_tasks([BUILTIN_DIR, tmp_path])
    with pytest.raises(TaskFileError, match="not a directory"):
        load_tasks([tmp_path / "nowhere"])
    (tmp_path / "calendar_parse.yaml").rename(tmp_path / "my_calendar.yaml")
    with pytest.raises(TaskFileError, match="name"):
        load_tasks([tmp_path])


def test_the_memory_store_claims_a_field_once_and_expires():
    async def scenario():
        store = MemoryKeyValue()
        assert await store.hsetnx("iv:1", "a:1", "first", 60)
        assert not await store.hsetnx("iv:1", "a:1", "second", 60)
        assert (await store.hgetall("iv:1")) == {"a:1": "first"}
        await store.set("k", "v", 1)
        assert await store.get("k") == "v" and 0 < await store.ttl("k") <= 1
        await asyncio.sleep(1.05)
        assert await store.get("k") is None and await store.ttl("k") == 0

    asyncio.run(scenario())


def test_task_roles_map_to_model_routes_that_exist():
    from pydantic import ValidationError

    from gateway.config import GatewaySettings

    assert GatewaySettings(task_routes='{"analysis": "local"}').task_route_table() == {"analysis": "local",
                                                                                       "": "local"}
    with pytest.raises(ValidationError, match="is not a model route"):
        GatewaySettings(task_routes='{"analysis": "nope"}')
    with pytest.raises(ValidationError, match="not JSON"):
        GatewaySettings(task_routes="[1")
    with pytest.raises(ValidationError, match="JSON object"):
        GatewaySettings(task_routes='["local"]')


def test_a_date_phrase_the_notice_does_not_hold_gives_way_to_the_notices_own():
    value = {"text": "[현대자동차] 1차 면접은 12월 14일(월) 오전 10시 양재 사옥에서 진행됩니다.",
             "reference_date": "2026-12-04", "timezone": None}
    rewritten = {"company": "현대", "stage": "면접", "title": "", "start_text": "12월 14일(월) 오후 10시",
                 "end_text": ""}
    out = post.calendar_dates(rewritten, value)
    assert out["start"] == "2026-12-14T10:00:00+09:00" and out["dates_from"] == "scan"
    assert out["company"] == "현대자동차"  # the whole word the notice writes
    as_written = post.calendar_dates({**rewritten, "start_text": "12월 14일(월)  오전 10시"}, value)
    assert as_written["dates_from"] == "model" and as_written["start"] == "2026-12-14T10:00:00+09:00"
    assert post.whole_name("네이버", "네이버웹툰의 발표") == "네이버웹툰"
    assert post.whole_name("토스", "[토스] 면접") == "토스"
    assert post.whole_name("구글", "네이버 면접") == "구글"  # not in the notice: as the model wrote it


def test_a_lone_surrogate_in_the_input_is_refused_naming_its_field():
    from services.runtime.tasks.checks import TaskInputError, checked_input

    task = load_tasks([BUILTIN_DIR])["answer_feedback"]
    with pytest.raises(TaskInputError) as err:
        checked_input(task, {"question": "자기소개", "answer": "저는\ud800입니다"})
    assert err.value.violations[0][0] == "input.answer"
    with pytest.raises(TaskInputError) as err:
        checked_input(task, {"question": "자기소개", "answer": "답", "\ud800": 1})
    assert err.value.violations[0][0] == "input"
    assert checked_input(task, {"question": "자기소개", "answer": "저는 백엔드 개발자입니다"})["answer"]
