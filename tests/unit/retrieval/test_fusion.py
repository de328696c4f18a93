import numpy as np

from services.retrieval.fusion import ScoredDoc, mmr, weighted_fusion


def doc(i, score, vec=None):
    return ScoredDoc(str(i), score, f"doc {i}", {}, vector=None if vec is None else np.asarray(vec, dtype=np.float32))


def test_weighted_fusion_normalises_each_leg_and_weights_them():
    dense = [doc(1, 0.9), doc(2, 0.8), doc(3, 0.7)]
    keyword = [doc(3, 30.0), doc(4, 10.0)]
    fused = weighted_fusion(dense, keyword, dense_weight=0.5)
    by = {d.doc_id: d.score for d in fused}
    assert by["3"] == 0.5 * 0.0 + 0.5 * 1.0 and by["1"] == 0.5
    only_keyword = weighted_fusion(dense, keyword, dense_weight=0.0)
    assert only_keyword[0].doc_id == "3"


def test_mmr_skips_near_duplicates():
    docs = [doc(1, 1.0, [1, 0]), doc(2, 0.99, [1, 0.01]), doc(3, 0.5, [0, 1])]
    assert [d.doc_id for d in mmr(docs, 2, diversity=0.0)] == ["1", "2"]
    assert [d.doc_id for d in mmr(docs, 2, diversity=0.7)] == ["1", "3"]
