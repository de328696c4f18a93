"""bench.llm_select: the seeds' weighted score and the tuning of the copy threshold."""

from __future__ import annotations

import pytest

from bench.llm_select import DATA, WEIGHTS, rank, tune_copy
from services.reasoning.checks import CheckRules


def test_min_max_normalised_weighted_score():
    passing = {"rubric": {"cards_passing": 0.5}}
    results = {"big": {"quality": 0.9, "reasons_p50_s": 60.0, "peak_rss_gb": 2.0, "cost_per_1k_usd": 0.0, **passing},
               "small": {"quality": 0.5, "reasons_p50_s": 20.0, "peak_rss_gb": 1.0, "cost_per_1k_usd": 0.0,
                         **passing}}
    (first, s1, p1), (second, s2, _) = rank(results)
    assert WEIGHTS == {"quality": 0.4, "speed": 0.2, "memory": 0.2, "cost": 0.2}
    # small: speed 1 + memory 1 + cost 1 (all equal) -> 0.6; big: quality 1 + cost 1 -> 0.6; the tie goes to quality
    assert (first, second) == ("big", "small") and s1 == pytest.approx(0.6) and s2 == pytest.approx(0.6)
    assert p1["cost"] == 1.0 and rank(dict(reversed(list(results.items()))))[0][0] == "big"


def test_the_services_copy_threshold_is_the_one_tuned_on_the_tuning_set():
    chosen, grid = tune_copy(DATA / "reasoning_checks_tune.json")
    assert chosen == CheckRules().copy_containment
    assert max(r["accuracy"] for r in grid) == next(r["accuracy"] for r in grid if r["threshold"] == chosen)


def test_a_candidate_with_no_passing_card_ranks_last_whatever_its_score():
    results = {"big": {"quality": 0.6, "reasons_p50_s": 60.0, "peak_rss_gb": 2.0, "cost_per_1k_usd": 0.0,
                       "rubric": {"cards_passing": 0.5}},
               "small": {"quality": 0.6, "reasons_p50_s": 20.0, "peak_rss_gb": 1.0, "cost_per_1k_usd": 0.0,
                         "rubric": {"cards_passing": 0.0}}}
    (first, s1, _), (second, s2, _) = rank(results)
    assert s2 > s1  # the rubric ties, so the faster, smaller model scores higher ...
    assert (first, second) == ("big", "small")  # ... but shows no reason at all: not eligible
