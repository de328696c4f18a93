"""The quality gate of a model upgrade (services/retrieval/gate.py): its figures, its verdict and its checks."""

import asyncio
import math

import pytest

from services.retrieval.gate import Gate, GateQuery, check_gate, judge, ndcg_at, recall_at, unknown_documents


def test_recall_and_ndcg_at_10_by_hand():
    ranked = ["a", "x", "b"] + [f"n{i}" for i in range(8)] + ["c"]
    assert recall_at(ranked, {"a", "b", "c"}) == pytest.approx(2 / 3)  # c is 12th
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, {"a", "b", "c"}) == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    assert ndcg_at(["a"], {"a"}) == 1.0 and recall_at([], {"a"}) == 0.0


def run(gate, old, new):
    async def ranked(table, text):
        return table[text]

    return asyncio.run(judge(gate, lambda t: ranked(old, t), lambda t: ranked(new, t), "r1", "r2"))


def test_the_gate_passes_within_the_margin_and_refuses_beyond_it_with_both_figures():
    queries = tuple(GateQuery(f"q{i}", (f"d{i}",)) for i in range(50))
    old = {f"q{i}": [f"d{i}"] for i in range(50)}  # every relevant document first
    one_miss = dict(old, q0=["zz"])  # recall 49/50: 2 points lower
    two_miss = dict(one_miss, q1=["zz"])  # 4 points lower
    verdict = run(Gate(queries, margin=0.02), old, one_miss)
    assert verdict.passed and verdict.old_recall == 1.0 and verdict.new_recall == pytest.approx(0.98)
    verdict = run(Gate(queries, margin=0.02), old, two_miss)
    assert not verdict.passed and verdict.new_recall == pytest.approx(0.96) and verdict.queries == 50
    assert "0.9600" in verdict.summary() and "1.0000" in verdict.summary()
    # nDCG alone can refuse: the relevant document moved from 1st to 10th in every query, recall unchanged
    late = {q: [f"n{j}" for j in range(9)] + old[q] for q in old}
    verdict = run(Gate(queries), old, late)
    assert verdict.new_recall == verdict.old_recall and verdict.new_ndcg < 0.5 and not verdict.passed
    assert run(Gate(queries), old, old).passed  # equal versions always pass


def test_bad_gates_are_named_field_by_field():
    assert [v.field for v in check_gate(Gate(()))] == ["gate.queries"]
    bad = Gate((GateQuery(" ", ("a",)), GateQuery("q", ())), margin=1.5, mode="fuzzy")
    assert [v.field for v in check_gate(bad)] == ["gate.queries[0].query", "gate.queries[1].relevant_ids",
                                                  "gate.margin", "gate.mode"]
    gate = Gate((GateQuery("q", ("a", "b")), GateQuery("r", ("c",))))
    assert [v.field for v in unknown_documents(gate, {"a", "c"})] == ["gate.queries[0].relevant_ids[1]"]
