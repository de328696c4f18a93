from services.retrieval.korean.bm25 import Bm25, term_index


def weight(vec, term):
    return dict(zip(vec.indices, vec.values, strict=True))[term_index(term)]


def test_term_frequency_saturates():
    bm = Bm25(k1=1.2, b=0.0, avg_doc_len=10)
    w1 = weight(bm.document(["책"]), "책")
    w2 = weight(bm.document(["책"] * 2), "책")
    w10 = weight(bm.document(["책"] * 10), "책")
    assert w1 < w2 < w10 < bm.k1 + 1
    assert (w2 - w1) > (w10 - w2) / 8


def test_longer_documents_weigh_a_term_less():
    bm = Bm25(avg_doc_len=10)
    short = weight(bm.document(["책", "소설"]), "책")
    long = weight(bm.document(["책"] + ["기타"] * 40), "책")
    assert short > long


def test_indices_are_stable_sorted_and_unique():
    vec = Bm25().document(["나", "가", "나"])
    assert vec.indices == sorted(set(vec.indices)) and len(vec.indices) == 2
    import zlib

    assert term_index("책") == zlib.crc32("책".encode()) and 0 <= term_index("책") < 2**32


def test_query_side_counts_each_term_once():
    q = Bm25.query(["책", "책", "소설"])
    assert sorted(q.values) == [1.0, 1.0]
