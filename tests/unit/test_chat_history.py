"""/v1/chat's history policies: refuse (as before), the last N turns, or the newest that fit a budget."""

from clients.reasoning import Message
from gateway.reasoning.chat import trim_history


def conversation(turns: int, size: int = 10) -> list[Message]:
    out = []
    for i in range(turns):
        out += [Message("user", f"질문 {i} " + "가" * size), Message("assistant", f"답 {i} " + "나" * size)]
    return out


def test_refuse_keeps_everything_for_the_service_to_judge():
    history = conversation(8)
    assert trim_history(history, "refuse", 5, 10) == (history, {"policy": "refuse", "kept": 16, "dropped": 0})


def test_last_turns_keeps_the_last_n_questions_with_their_answers():
    history = conversation(8)
    kept, said = trim_history(history, "last_turns", 5, 0)
    assert kept == history[6:] and kept[0].content.startswith("질문 3") and said["dropped"] == 6
    assert trim_history(history[:6], "last_turns", 5, 0)[0] == history[:6]  # fewer turns: all kept


def test_fit_keeps_the_newest_messages_within_the_budget_starting_at_a_question():
    history = conversation(8, size=100)  # each message ~108 estimated tokens
    kept, said = trim_history(history, "fit", 5, 500)
    assert kept[0].role == "user" and kept == history[-4:] and said == {"policy": "fit", "kept": 4, "dropped": 12}
    assert trim_history(history, "fit", 5, 50)[0] == []  # not even the last answer fits
