"""bench.answers_replay re-checks a stored run's kept answers with today's question checks (no LLM)."""

from bench.answers_replay import replay

DATA = {"name": "tiny", "passages": [{"id": "p1", "title": "해오름시 버스", "text": "해오름시 배차 간격은 12분이다."}],
        "questions": [{"id": "a1", "question": "해오름시 배차 간격은 몇 분이야?", "answerable": True},
                      {"id": "u1", "question": "해솔시 배차 간격은 몇 분이야?", "answerable": False},
                      {"id": "u2", "question": "해오름시 버스 요금은 얼마야?", "answerable": False}]}


def test_kept_answers_are_sorted_by_what_todays_checks_say():
    results = {"sets": {"tiny": {"answers": [
        {"id": "a1", "reason": "answered", "answer": "12분", "cited": ["p1"]},
        {"id": "u1", "reason": "answered", "answer": "12분", "cited": ["p1"]},
        {"id": "u2", "reason": "unsupported", "answer": "", "cited": []}]}}}
    out = replay(DATA, results)
    assert out["answerable_refused"] == [] and [r.split(":")[0] for r in out["unanswerable_refused"]] == ["u1"]
    assert out["unanswerable_kept"] == []  # u2 was refused by the run itself: not replayed
