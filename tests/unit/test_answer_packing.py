"""Grounded-answer packing, citation checks and the streamed answer text (pure functions)."""

import json

from gateway.answers.decoder import AnswerText
from gateway.answers.packing import Hit, checked_citations, pack, sentences, window

LONG = ("회사 소개입니다. 우리는 2010년에 세워졌습니다. 복지로 점심을 제공합니다. 연차는 15일이고 다음 해로 5일까지 "
        "이월됩니다. 재택 근무는 주 2회입니다. 사무실은 서울에 있습니다.")


def test_sentences_are_spans_without_surrounding_space():
    spans = sentences("  첫 문장입니다.  둘째 문장?\n셋째")
    text = "  첫 문장입니다.  둘째 문장?\n셋째"
    assert [text[s:e] for s, e in spans] == ["첫 문장입니다.", "둘째 문장?", "셋째"]


def test_the_window_is_whole_sentences_sharing_most_with_the_query():
    s, e = window(LONG, "연차 이월", 45)
    assert LONG[s:e].startswith("연차는") or "연차는 15일" in LONG[s:e]
    assert e - s <= 45 and LONG[s:e].endswith(".")
    assert window("짧은 글.", "아무거나", 100) == (0, len("짧은 글."))


def test_a_sentence_longer_than_the_cap_is_cut_at_a_space():
    text = "가나다 " * 50
    s, e = window(text, "가나다", 30)
    assert 0 < e - s <= 30 and text[s:e] == text[s:e].rstrip() and text[e] == " "


def test_pack_keeps_the_budget_drops_near_duplicates_and_numbers_from_one():
    hits = [Hit("a", LONG, 1.0, 0.9, {}), Hit("b", LONG + " ", 0.9, 0.89, {}),
            Hit("c", "배송은 3일 걸립니다.", 0.5, 0.8, {})]
    passages, dropped = pack(hits, "연차 이월", 120)
    assert dropped == 1 and [p.doc_id for p in passages] == ["a", "c"] and [p.n for p in passages] == [1, 2]
    assert sum(len(p.text) for p in passages) <= 120
    for p in passages:
        source = next(h.text for h in hits if h.doc_id == p.doc_id)
        assert source[p.start:p.end] == p.text


def test_citations_naming_no_passage_are_removed_and_counted():
    text, cited, removed = checked_citations("답입니다 [2] 그리고 [5].", [2, 1, "x", True, 9], 3)
    assert text == "답입니다 [2] 그리고 ." and cited == [2, 1] and removed == 4  # "x", True, 9 and [5]


def test_the_answer_text_streams_out_of_the_json_piece_by_piece():
    raw = json.dumps({"answerable": True, "answer": "줄\n바꿈 \"인용\" 😀 끝", "citations": [1]}, ensure_ascii=True)
    decoder = AnswerText()
    out = "".join(decoder.feed(raw[i:i + 3]) for i in range(0, len(raw), 3))
    assert out == "줄\n바꿈 \"인용\" 😀 끝" and decoder.closed
