"""Fused scores: deterministic ties, the one-document and lone-match cases, monotonicity, AUTO's reason."""

import random

import numpy as np
import pytest

from services.retrieval.fusion import AUTO_MODEL, ScoredDoc, auto_fusion, dbsf_fusion, fuse, rrf_fusion, weighted_fusion
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.query import SearchQuery


def doc(i, score):
    return ScoredDoc(str(i), score, f"doc {i}", {})


FUSIONS = {
    "rrf": lambda d, k: rrf_fusion(d, k, 60),
    "dbsf": dbsf_fusion,
    "weighted": lambda d, k: weighted_fusion(d, k, 0.2),
    "auto": lambda d, k: auto_fusion(d, k)[0],
}


@pytest.mark.parametrize("name", sorted(FUSIONS))
def test_a_one_document_collection_gives_its_perfect_match_full_credit(name):
    fused = FUSIONS[name]([doc("only", 0.91)], [doc("only", 7.5)])
    expected = {"rrf": 2 / 61, "dbsf": 2.0, "weighted": 1.0, "auto": 1.0}[name]
    assert [d.doc_id for d in fused] == ["only"] and fused[0].score == pytest.approx(expected)
    assert fused[0].dense.rank == fused[0].keyword.rank == 1


def test_a_lone_keyword_match_gets_keyword_credit():
    dense = [doc(i, 0.9 - 0.01 * i) for i in range(6)]
    keyword = [doc(3, 4.2)]
    weighted = {d.doc_id: d.score for d in weighted_fusion(dense, keyword, 0.2)}
    # The match gets the whole keyword share (0.8) on top of its dense credit; before, exactly 0.2 × dense.
    assert weighted["3"] == pytest.approx(0.2 * (0.87 - 0.85) / (0.90 - 0.85) + 0.8)
    assert max(weighted, key=weighted.get) == "3"
    auto, reason = auto_fusion(dense, keyword, n_terms=3, collection_size=6)
    w = float(reason.rsplit("dense weight ", 1)[1])
    by = {d.doc_id: d for d in auto}
    assert 0 < w < 1 and by["3"].keyword.rank == 1
    # The whole keyword share on top of its dense credit.
    assert by["3"].score == pytest.approx(w * (0.87 - 0.85) / (0.90 - 0.85) + (1 - w), abs=0.01)
    assert 0.0 <= auto[-1].score <= auto[0].score <= 1.0


@pytest.mark.parametrize("name", sorted(FUSIONS))
def test_fused_scores_are_monotone_in_both_legs(name):
    rng = random.Random(5)
    for _ in range(30):
        ids = [f"d{i}" for i in range(rng.randint(2, 40))]
        dense = sorted((doc(i, rng.uniform(0.6, 0.95)) for i in ids), key=lambda d: -d.score)
        keyword = sorted((doc(i, rng.uniform(0.5, 12.0)) for i in rng.sample(ids, rng.randint(1, len(ids)))),
                         key=lambda d: -d.score)
        fused = FUSIONS[name](dense, keyword)
        assert [d.score for d in fused] == sorted((d.score for d in fused), reverse=True)
        dr = {d.doc_id: d.score for d in dense}
        kr = {d.doc_id: d.score for d in keyword}
        score = {d.doc_id: d.score for d in fused}
        for a in ids:
            for b in ids:
                if dr[a] >= dr[b] and kr.get(a, 0.0) >= kr.get(b, 0.0):
                    assert score[a] >= score[b] - 1e-12, (a, b)


def test_ties_are_broken_by_best_leg_rank_then_id_whatever_the_input_order():
    dense = [doc("m", 0.9), doc("z", 0.8), doc("a", 0.7)]
    keyword = [doc("b", 5.0), doc("y", 4.0), doc("a", 3.0)]
    first = [d.doc_id for d in rrf_fusion(dense, keyword, 60)]
    # m and b tie (rank 1 in one leg each), z and y tie (rank 2): best rank, then id.
    assert first == ["a", "b", "m", "y", "z"]
    for _ in range(10):
        shuffled_d, shuffled_k = dense[:], keyword[:]
        random.shuffle(shuffled_d)
        random.shuffle(shuffled_k)
        legs = {"dense": sorted(shuffled_d, key=lambda d: -d.score),
                "keyword": sorted(shuffled_k, key=lambda d: -d.score)}
        ranked = HybridSearcher.finish(SearchQuery("q", top_k=5, fusion="rrf", rrf_k=60), "hybrid", legs, 5)
        assert [d.doc_id for d in ranked.hits] == first


def test_equal_scores_within_a_leg_are_ordered_by_id():
    legs = {"dense": [doc("c", 0.5), doc("a", 0.5), doc("b", 0.5)]}
    ranked = HybridSearcher.finish(SearchQuery("q", top_k=3, mode="dense"), "dense", legs, 3)
    assert [d.doc_id for d in ranked.hits] == ["a", "b", "c"]


def dense_weight(reason):
    return float(reason.rsplit("dense weight ", 1)[1])


def test_auto_leans_on_the_leg_the_query_gives_evidence_for():
    flat_dense = [doc(i, 0.80 + 0.001 * (i % 3)) for i in range(30)]
    strong_keyword = [doc(7, 60.0)] + [doc(i, 5.0) for i in range(8, 20)]
    fused, reason = auto_fusion(flat_dense, strong_keyword, n_terms=12, collection_size=1000)
    assert fused[0].doc_id == "7" and dense_weight(reason) < 0.2 and "dense flat" in reason
    peaked_dense = [doc(3, 0.95)] + [doc(i, 0.70 + 0.001 * i) for i in range(4, 30)]
    weak_keyword = [doc(i, 1.0 + 0.01 * (i % 2)) for i in range(10, 30)]
    fused, reason = auto_fusion(peaked_dense, weak_keyword, n_terms=4, collection_size=1000)
    assert fused[0].doc_id == "3" and dense_weight(reason) > 0.8 and "dense peaked" in reason


def test_auto_model_weights_move_the_way_the_evidence_says():
    model = AUTO_MODEL
    mid = model.mean
    assert 0.0 < model.dense_weight(mid) < 1.0
    stronger_keyword = (mid[0] + 1, mid[1], mid[2])
    more_peaked_dense = (mid[0], mid[1] + 1, mid[2])
    longer_query = (mid[0], mid[1], mid[2] + 1)
    assert model.dense_weight(stronger_keyword) < model.dense_weight(mid)
    assert model.dense_weight(more_peaked_dense) > model.dense_weight(mid)
    assert model.dense_weight(longer_query) < model.dense_weight(mid)
    assert model.dense_weight((1e9, -1e9, 1e9)) == pytest.approx(0.0, abs=1e-12)  # no overflow


def test_auto_without_index_terms_is_the_dense_leg_and_says_so():
    dense = [doc(i, 0.9 - 0.01 * i) for i in range(5)]
    ranked = HybridSearcher.finish(SearchQuery("q", top_k=5, fusion="auto"), "hybrid", {"dense": dense}, 5)
    assert [d.doc_id for d in ranked.hits] == ["0", "1", "2", "3", "4"]
    assert ranked.fusion == "auto" and dense_weight(ranked.reason.split(";")[0]) == 1.0
    assert "no index terms" in ranked.reason


@pytest.mark.parametrize(("fusion", "reason"), [("rrf", "requested rrf (k 60)"), ("dbsf", "requested dbsf"),
                                                ("weighted", "requested weighted (dense weight 0.4)")])
def test_requested_fusions_say_so(fusion, reason):
    q = SearchQuery("q", fusion=fusion, dense_weight=0.4)
    assert fuse(q, [doc(1, 0.9)], [doc(1, 2.0)])[1] == reason


def test_score_floor_keeps_the_hit_whose_own_score_is_the_floor():
    dense = [doc(i, 0.9 - 0.013 * i) for i in range(8)]
    keyword = [doc(i, 9.0 - i) for i in range(2, 6)]
    q = SearchQuery("q", top_k=8, fusion="auto")
    hits = HybridSearcher.finish(q, "hybrid", {"dense": dense, "keyword": keyword}, 8).hits
    q.score_threshold = float(np.float32(hits[3].score))
    floored = HybridSearcher.finish(q, "hybrid", {"dense": dense, "keyword": keyword}, 8).hits
    assert [d.doc_id for d in floored] == [d.doc_id for d in hits[:4]]
