"""bench.fusion_eval's best-chunk dense leg (a design option it measures, not a service feature)."""

import numpy as np

from bench.fusion_eval import Chunks, EvalSet, chunk_text


def test_chunks_split_at_sentence_ends_and_stay_under_the_size():
    text = "첫 문장입니다. 두 번째 문장이다. 세 번째는 물음인가요? 네 번째!\n다섯째 줄"
    chunks = chunk_text(text, 20)
    assert all(len(c) <= 20 for c in chunks)
    assert " ".join(chunks).replace("\n", " ") == " ".join(text.split())
    assert chunks[0] == "첫 문장입니다. 두 번째 문장이다."


def test_a_short_passage_is_one_chunk_and_a_long_sentence_stays_whole():
    assert chunk_text("짧은 글", 400) == ["짧은 글"]
    long = "가" * 50
    assert chunk_text(long, 10) == [long]


def test_a_passage_is_scored_by_its_best_chunk():
    ev = EvalSet("t", [("a", "x"), ("b", "y")], [])
    q = np.array([1.0, 0.0])
    # a has a weak and a strong chunk, b one middling chunk: a ranks first with its strong chunk's cosine.
    chunks = Chunks(np.array([[0.0, 1.0], [0.9, 0.1], [0.5, 0.5]]), np.array([0, 0, 1]))
    leg = chunks.best_chunk_leg(ev, q)
    assert [d.doc_id for d in leg] == ["a", "b"]
    assert leg[0].score == 0.9 and leg[1].score == 0.5
