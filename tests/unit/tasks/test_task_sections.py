"""A résumé or posting cut to the sections a task reads (services/runtime/tasks/sections.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from services.runtime.tasks import sections
from services.runtime.tasks.spec import load_tasks

RESUME = """김하늘 / 백엔드 개발자

[인적 사항]
주소: 서울시 마포구 월드컵로 1
연락처: 010-1234-5678

[경력]
㈜한빛커머스 백엔드 개발 (2021.03 ~ 현재)
- Java, Spring Boot로 주문 시스템 운영

■ 보유 기술
Java, Spring Boot, MySQL, Redis, Kafka

[자기소개서]
저는 어릴 때부터 컴퓨터를 좋아했습니다.

병역
육군 병장 만기 전역

학력
한빛대학교 컴퓨터공학과 졸업
"""

POSTING = """[회사 소개]
한빛소프트웨어는 2010년에 세운 회사입니다.

[주요 업무]
● 복지 포인트 플랫폼 백엔드 개발
- 주문 API 설계

[자격 요건]
- Java/Spring 3년 이상

[복리후생 및 혜택]
- 점심 식대 지원

[전형 절차 및 일정]
서류 → 코딩테스트 → 면접
"""


def test_a_resume_keeps_experience_skills_and_education_only() -> None:
    out = sections.cut(RESUME, "resume")
    assert "김하늘 / 백엔드 개발자" in out  # before the first heading: kept
    for kept in ("[경력]", "주문 시스템 운영", "■ 보유 기술", "Kafka", "학력", "컴퓨터공학과"):
        assert kept in out
    for dropped in ("월드컵로", "010-1234-5678", "어릴 때부터", "육군"):
        assert dropped not in out


def test_an_interviewer_reads_the_narrative_but_not_the_address() -> None:
    out = sections.cut(RESUME, "resume_personal")
    assert "어릴 때부터" in out and "주문 시스템" in out
    assert "월드컵로" not in out and "육군" not in out


def test_a_posting_keeps_duties_and_requirements_even_a_duty_that_names_benefits() -> None:
    out = sections.cut(POSTING, "posting")
    assert "복지 포인트 플랫폼 백엔드 개발" in out and "주문 API 설계" in out  # a duty, not a heading of benefits
    assert "Java/Spring 3년 이상" in out
    for dropped in ("2010년", "점심 식대", "코딩테스트"):
        assert dropped not in out


def test_a_text_without_structure_is_kept_whole() -> None:
    short = "백엔드 개발자 4년. Java, Spring Boot, MySQL, Redis로 주문 시스템을 운영했습니다."
    assert sections.cut(short, "resume") == short
    one = "[자기소개]\n저는 성실합니다."  # one heading: nothing to trust
    assert sections.cut(one, "resume") == one


def test_sentences_and_list_lines_are_not_headings() -> None:
    assert sections.heading("경력을 쌓았습니다.") is None
    assert sections.heading("Java, Spring, 경력 4년") is None
    assert sections.heading("복지 포인트 플랫폼 개발") is None  # undecorated and mostly not a section's name
    assert sections.heading("주요 경력 사항") == "주요 경력 사항"
    assert sections.heading("## Skills") == "Skills"
    assert sections.heading("1. 학력") == "학력"


LINES = st.lists(st.sampled_from(["[경력]", "[취미]", "■ 회사 소개", "Java 개발", "연락처:", "", "- Redis", "학력",
                                  "주문 시스템을 운영했습니다.", "자기소개", "지원 동기"]), max_size=20)


@given(LINES, st.sampled_from(sorted(sections.CUTS)))
def test_a_cut_only_removes_whole_lines_in_order(lines: list[str], kind: str) -> None:
    text = "\n".join(lines)
    out = sections.cut(text, kind)
    rest = iter(text.splitlines())
    assert all(any(line == other for other in rest) for line in out.splitlines())  # a subsequence of the lines
    if out != text:
        assert len(out) < len(text)


def test_task_files_declare_their_cuts_and_the_prompt_uses_them() -> None:
    tasks = load_tasks([Path("services/runtime/tasks/defs")])
    analysis = tasks["resume_analysis"]
    assert analysis.spec.sections == {"resume": "resume", "posting": "posting"}
    _, prompt = analysis.render({"resume": RESUME, "posting": POSTING})
    assert "Kafka" in prompt and "월드컵로" not in prompt and "점심 식대" not in prompt
    _, whole = analysis.render({"resume": RESUME, "posting": POSTING}, cut=False)
    assert "월드컵로" in whole and len(whole) > len(prompt)


def test_a_cut_of_an_input_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    import pytest

    from services.runtime.tasks.spec import TaskFileError, load_file

    text = Path("services/runtime/tasks/defs/resume_analysis.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "resume_analysis.yaml"
    bad.write_text(text.replace("sections: {resume: resume, posting: posting}", "sections: {cv: resume}"),
                   encoding="utf-8")
    with pytest.raises(TaskFileError, match="sections.cv"):
        load_file(bad)
