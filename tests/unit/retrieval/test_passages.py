"""Long documents as passages: the cut, the layout label, and what the store does with a document's passages."""

import numpy as np
import pytest

from services.retrieval.fusion import best_passages
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.passages import DOCUMENT_LAYOUT, Layout, sentence_spans, split
from services.retrieval.query import Filter, SearchQuery
from services.retrieval.store import StoredPoint, open_store

SENTENCES = [f"{i}번째 문장은 도서관의 장서 {i * 7}권에 관한 설명입니다." for i in range(200)]
LONG = " ".join(SENTENCES)


def test_a_short_document_is_one_passage_the_whole_text():
    text = "짧은 문서입니다. 두 문장뿐입니다."
    spans = split(text, 600, 100)
    assert [(s.ordinal, s.start, s.end) for s in spans] == [(0, 0, len(text))]
    # up to 1.25x the size still one passage: no 20-character tail passages
    assert len(split("가" * 740, 600, 100)) == 1


def test_a_long_document_is_cut_at_sentence_ends_with_overlap_and_offsets_into_the_original():
    spans = split(LONG, 600, 100)
    assert len(spans) > 10
    assert [s.ordinal for s in spans] == list(range(len(spans)))
    ends = {e for _, e in sentence_spans(LONG)}
    starts = {s for s, _ in sentence_spans(LONG)}
    for a, b in zip(spans, spans[1:], strict=False):
        assert a.start in starts and a.end in ends  # whole sentences
        assert a.end - a.start <= 600 * 1.25
        assert b.start < a.end, "consecutive passages share the last sentences"
        assert a.end - b.start <= 100 + max(e - s for s, e in sentence_spans(LONG))
        assert b.start > a.start
    assert spans[0].start == 0 and spans[-1].end == len(LONG)
    covered = np.zeros(len(LONG), bool)
    for s in spans:
        covered[s.start:s.end] = True
    gaps = [i for i in np.flatnonzero(~covered) if not LONG[i].isspace()]
    assert gaps == [], "every character but the spaces between sentences is in a passage"


def test_a_sentence_longer_than_a_passage_is_cut_at_white_space_or_hard():
    words = " ".join(["단어"] * 1000)  # one 2,999-character sentence
    spans = split(words, 600, 100)
    assert all(s.end - s.start <= 600 for s in spans[:-1])
    assert all(words[s.start] != " " and words[s.end - 1] != " " for s in spans)
    hard = "가" * 3000
    spans = split(hard, 600, 100)
    assert "".join(hard[s.start:s.end] for s in spans) == hard


def test_the_layout_label_round_trips_and_a_catalog_without_one_is_one_point_per_document():
    assert Layout.parse(Layout("passages", 600, 100).label()) == Layout("passages", 600, 100)
    assert Layout.parse(None).kind == DOCUMENT_LAYOUT and not Layout.parse("document").passages
    with pytest.raises(ValueError):
        Layout.parse("paragraphs:3")


def _points(doc_id, n, vec_of, start_at=0):
    text = "".join(f"문단{k} " for k in range(n))
    return [StoredPoint(doc_id, f"문단{k}", {"category": "책"}, vec_of(k), [k + start_at], [1.0], k, k * 4,
                        k * 4 + 3, n, text if k == 0 and n > 1 else None) for k in range(n)]


@pytest.fixture(params=["edge", "client"])
def store(request):
    s = open_store(":memory:", request.param)
    meta = s.create_catalog("c", {"category": "keyword"}, "rev", "an", 4, 4.0, "passages:600/100")
    yield s, meta.collection
    s.close()


def unit(k):
    v = np.zeros(4, np.float32)
    v[k % 4] = 1.0
    v[(k + 1) % 4] = 0.1 * k
    return v.tolist()


def test_documents_are_counted_once_rewritten_without_stale_passages_and_deleted_whole(store):
    s, c = store
    s.upsert(c, _points("long", 6, unit) + _points("short", 1, unit))
    assert s.count(c) == 2 and s.count_points(c) == 7
    assert s.passage_counts(c, ["long", "short", "nope"]) == {"long": 6, "short": 1}
    assert s.document_texts(c, ["long"])["long"].startswith("문단0 문단1")
    docs = {d.doc_id: d.text for page in s.scroll_all(c) for d in page}
    assert docs == {"long": "".join(f"문단{k} " for k in range(6)), "short": "문단0"}
    s.upsert(c, _points("long", 2, unit))  # the document became shorter: passages 2..5 go
    assert s.count_points(c) == 3 and s.passage_counts(c, ["long"]) == {"long": 2}
    s.delete(c, ["long", "nope"])
    assert s.count_points(c) == 1 and s.count(c) == 1


def test_search_returns_one_hit_per_document_by_its_best_passage_or_every_passage(store):
    s, c = store
    s.upsert(c, _points("a", 8, unit) + _points("b", 8, unit, 100))
    searcher = HybridSearcher(s)
    query = np.array(unit(5))
    q = SearchQuery("q", top_k=5, mode="dense", filter=Filter())
    docs = searcher.run(c, q, "dense", query.tolist(), _no_terms(), passages=True).hits
    assert [d.doc_id for d in docs] == ["a", "b"]
    assert docs[0].passage is not None and docs[0].passage.ordinal == 5
    assert docs[0].passage.start == 20 and docs[0].passage.end == 23
    assert docs[0].text.startswith("문단0 문단1"), "a document hit carries its whole text"
    q = SearchQuery("q", top_k=5, mode="dense", filter=Filter(), group_by="passage")
    passages = searcher.run(c, q, "dense", query.tolist(), _no_terms(), passages=True).hits
    assert len(passages) == 5 and len({(p.doc_id, p.passage.ordinal) for p in passages}) == 5
    assert {p.passage.ordinal for p in passages[:2]} == {5}
    assert all(p.text == f"문단{p.passage.ordinal}" for p in passages)


def test_keyword_leg_sees_passages_past_the_first():
    docs = [_doc("x", 1), _doc("x", 0), _doc("y", 0)]
    assert [(d.doc_id, d.passage.ordinal) for d in best_passages(docs)] == [("x", 1), ("y", 0)]


def _doc(doc_id, ordinal):
    from services.retrieval.fusion import PassageRef, ScoredDoc

    return ScoredDoc(doc_id, 1.0, "t", {}, passage=PassageRef(ordinal, 0, 1, 2, "t"))


def _no_terms():
    from services.retrieval.korean.bm25 import SparseVector

    return SparseVector([], [])
