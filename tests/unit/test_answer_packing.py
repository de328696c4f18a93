"""Grounded-answer packing, the support checks and the streamed answer text (pure functions)."""

import json

from gateway.answers.packing import Hit, Passage, pack, sentences, window
from gateway.answers.support import check, clean, context, numbered, numbers, terms
from services.runtime.jsonstream import AnswerText

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


def test_a_hit_of_a_document_stored_as_passages_packs_the_passage_search_matched_with_document_offsets():
    doc = "연차는 15일입니다. " * 40 + LONG + " 사무실은 부산에도 있습니다." * 30
    start = doc.index("회사 소개")
    span = (start, start + len(LONG))
    passages, _ = pack([Hit("a", doc, 1.0, 0.9, {}, span)], "연차 이월", 2000)
    p = passages[0]
    assert span[0] <= p.start < p.end <= span[1], "the window lies inside the matched passage"
    assert doc[p.start:p.end] == p.text and "이월" in p.text


def test_sentences_are_numbered_across_passages_with_their_spans_in_the_document():
    doc = "머리말. 연차는 15일입니다. 이월은 5일까지입니다."
    passages = [Passage(1, "a", 5, len(doc), doc[5:], 1.0, 0.9, {"title": "휴가"}),
                Passage(2, "b", 0, 8, "배송은 3일.", 0.5, 0.8, {})]
    got = numbered(passages)
    assert [(s.k, s.passage, s.text) for s in got] == [
        (1, 1, "연차는 15일입니다."), (2, 1, "이월은 5일까지입니다."), (3, 2, "배송은 3일.")]
    assert all(doc[s.start:s.end] == s.text for s in got if s.doc_id == "a")
    assert context(passages, got).split("\n") == [
        "[1] (휴가)", "<1> 연차는 15일입니다.", "<2> 이월은 5일까지입니다.", "[2]", "<3> 배송은 3일."]


def test_content_terms_drop_particles_endings_and_question_words():
    assert terms("한결소프트 법인카드는 한 달 사용 한도가 얼마인가요?") == ["한결소프트", "법인카드", "사용", "한도"]
    assert terms("반품 신청 기한은요?") == ["반품", "신청", "기한"]
    assert clean("남은 연차는 5일입니다 [1] <7>.") == "남은 연차는 5일입니다."


def test_an_answer_is_supported_only_by_sentences_holding_it_and_covering_the_question():
    text = "연차 휴가는 입사 1년 후 15일이 주어집니다. 이월은 5일까지입니다."
    passages = [Passage(1, "a", 0, len(text), text, 1.0, 0.9, {})]
    got = numbered(passages)
    ok = check("입사 1년 후 15일이 주어집니다.", [1, 7, True], got, "연차 휴가는 며칠 주어지나요?")
    assert ok.supported and [s.k for s in ok.evidence] == [1] and ok.removed == 2
    assert check("20일이 주어집니다.", [1], got, "연차 휴가는 며칠?").reason == "number_not_in_evidence"
    assert check("명성황후입니다.", [1], got, "연차 휴가는 며칠?").reason == "answer_not_in_evidence"
    assert check("15일이 주어집니다.", [1], got, "육아휴직 한도는 며칠?").reason == "question_not_covered"
    other = numbered([*passages, Passage(2, "b", 0, 17, "배송은 3일이 걸립니다.", 0.5, 0.8, {})])
    # 배송 tells the passages apart (in one of two): evidence holding the answer but not it does not count
    assert check("3일이 걸립니다.", [3], other, "배송은 지방에도 며칠?").supported
    # ... but a rare noun of the question the evidence never says refuses it (issue 78: 연차 is another passage's)
    assert check("3일이 걸립니다.", [3], other, "배송은 연차 중에도 며칠?").reason == "subject_not_in_evidence"
    assert check("15일이 주어집니다.", [1], other, "배송은 며칠 걸리나요?").reason == "question_not_covered"
    assert check("명성황후입니다.", [], got, "연차 휴가는 며칠?").reason == "no_evidence"  # named none, none holds it
    wrong = check("15일입니다.", [2], got, "연차 휴가는 며칠?")  # the sentence next to the right one
    assert wrong.supported and wrong.located and [s.k for s in wrong.evidence] == [1]  # code found where it is
    assert numbers("식대는 1만 2천 원, 숙박은 120,000원, 1.5kg") == ["12000원", "120000원", "1.5kg"]
    assert check("12,000원입니다.", [], numbered([Passage(1, "c", 0, 14, "야근 식대는 1만 2천 원이다.", 1.0, 0.9, {})]),
                 "야근 식대는 얼마?").supported


def test_the_answer_text_streams_out_of_the_json_piece_by_piece():
    raw = json.dumps({"answerable": True, "answer": "줄\n바꿈 \"인용\" 😀 끝", "citations": [1]}, ensure_ascii=True)
    decoder = AnswerText()
    out = "".join(decoder.feed(raw[i:i + 3]) for i in range(0, len(raw), 3))
    assert out == "줄\n바꿈 \"인용\" 😀 끝" and decoder.closed


def test_a_bare_yes_needs_every_term_of_the_question_in_its_evidence():
    text = "한빛소프트웨어는 점심 식대를 지원합니다. 재택근무는 주 2회 가능합니다."
    got = numbered([Passage(1, "a", 0, len(text), text, 1.0, 0.9, {})])
    refused = check("네", [1], got, "한빛소프트웨어 주차 지원은 있어?")  # 주차 is in no sentence
    assert not refused.supported and refused.reason == "answer_not_in_evidence"
    assert check("네, 있습니다.", [1], got, "한빛소프트웨어 식대 지원은 있어?").supported
    assert check("네", [], got, "한빛소프트웨어 식대 지원은 있어?").supported  # code finds the sentence
