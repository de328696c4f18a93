"""What an assistant session holds (gateway/assistant/held.py), and when a reply rests on it (issue 78).

The cases are the shapes of split A's follow-ups (bench/data/assistant_followups.json), written here with
other companies, times and numbers.
"""

from __future__ import annotations

from gateway.assistant import held

POSTINGS = {"postings": [{"company": "다온랩스", "role": "데이터 엔지니어", "location": "성수"}]}
EVENT = {"company": "누리페이", "stage": "면접", "title": "누리페이 2차 면접", "start": "2027-01-13T15:30:00+09:00",
         "end": None, "all_day": False}


def test_a_tool_result_becomes_lines_with_its_dates_also_read_in_korean():
    assert held.of_result(POSTINGS) == "company: 다온랩스 · role: 데이터 엔지니어 · location: 성수"
    lines = held.of_result(EVENT)
    assert "start: 2027-01-13T15:30:00+09:00 (2027년 1월 13일 오후 3시 30분)" in lines
    assert len(held.of_result({"rows": [POSTINGS] * 100})) <= held.EVIDENCE_CHARS


def test_a_reply_the_results_hold_is_kept():
    assert held.check("다온랩스예요.", "아까 찾은 공고 회사가 어디였지?", [held.of_result(POSTINGS)]) is None
    assert held.check("오후 3시 30분이에요.", "그 면접 몇 시였지?", [held.of_result(EVENT)]) is None
    answer = held.of_answer("수습 기간은 6개월입니다.", ["수습 기간은 6개월이며 급여는 90%가 지급됩니다."])
    assert held.check("네, 90%가 나와요.", "수습 동안 급여는 얼마나 나와?", [answer]) is None


def test_a_reply_the_results_do_not_hold_is_not():
    assert held.check("오후 4시예요.", "그 면접 몇 시였지?", [held.of_result(EVENT)]) == "number_not_in_evidence"
    assert held.check("연 200만 원까지 나와요.", "그 회사 교육비는 얼마야?",
                      [held.of_result(POSTINGS)]) == "number_not_in_evidence"
    assert held.check("판교에 있는 한빛소프트웨어예요.", "아까 찾은 공고 회사가 어디였지?",
                      [held.of_result(POSTINGS)]) == "answer_not_in_evidence"
    assert held.check("네, 가능합니다.", "그 회사 재택근무 돼?", [held.of_result(POSTINGS)]) == "answer_not_in_evidence"
    assert held.check("다온랩스예요.", "아까 찾은 공고 회사가 어디였지?", []) == "no_evidence"


def test_a_reply_of_another_type_than_asked_is_not():
    # 몇 시: a time, not a name, even when the name is in the result
    assert held.check("누리페이예요.", "그 면접 몇 시였지?", [held.of_result(EVENT)]) == "answer_type"


def test_only_the_latest_turns_with_evidence_are_shown():
    turns = {1: {"evidence": "a"}, 2: {"evidence": ""}, 3: {"evidence": "b"}, 4: {"evidence": "c"}, 5: {}}
    assert held.latest(turns) == ["b", "c"]


def test_a_question_is_about_the_documents_when_a_word_of_it_is_in_a_passage_found():
    from gateway.answers.packing import Passage
    from gateway.answers.relevance import Relevance
    from gateway.answers.serving import Prepared
    from gateway.assistant.serving import Assistant

    def prepared(text: str) -> Prepared:
        passage = Passage(1, "d1", 0, len(text), text, 1.0, 0.85, {})
        return Prepared(None, None, None, [passage], [], Relevance({}, 0.9, 0.3), {}, 0.0, 0.0)  # type: ignore[arg-type]

    policy = "신입 사원의 수습 기간은 3개월이며 급여는 전액 지급된다."
    assert Assistant._about_documents(prepared(policy), "그동안 급여는 다 나와?")  # 급여: a word of it found
    assert Assistant._about_documents(prepared(policy), "왜?")  # no word of its own: searched
    # Not the relevance decision (0.9 here): it reads the rewrite, which carries the earlier turns' subject.
    assert not Assistant._about_documents(prepared(policy), "오늘 저녁 뭐 먹지?")
