"""Whether the retrieved passages can answer the question at all, decided before the LLM is called.

A dense cosine alone cannot say it (e5's cosines are compressed: answerable and unanswerable questions
overlap), so the signals the mesh already has are combined into one probability by a logistic
regression: the best dense cosine and its margin over the next, how many of the question's content
terms the best passage and the packed passages hold, and whether the two legs agree on the best hit.
Below the threshold the answer is ``answerable: false`` (``reason: not_relevant``) without an LLM call.

The weights and the threshold are fitted by ``python -m bench.answers --fit-relevance`` on the
answers-ko **tune** split (retrieval only, follow-ups left out) and never on a set that is reported;
``bench/results/answers_relevance.md`` holds the fit and its figures on the eval split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.answers.packing import Passage
from gateway.answers.support import present, squash, terms

FEATURES = ("cos1", "margin", "cover_top", "cover_all", "legs_agree")  # every signal computed

# Fitted by `python -m bench.answers --fit-relevance` on the answers-ko tune split (single-turn
# questions): the feature set and the L2 strength chosen by leave-one-out log loss on that split, the
# threshold by leave-one-out probabilities; see bench/results/answers_relevance.md.
MODEL: dict[str, Any] = {
    "features": ["cos1", "margin", "cover_top", "cover_all", "legs_agree"],
    "means": [0.9016, 0.0193, 0.4642, 0.5902, 0.6486],
    "scales": [0.0355, 0.0192, 0.222, 0.2491, 0.4774],
    "coefs": [2.2436, 0.7082, -3.0993, 1.1413, 1.0462],
    "intercept": 0.0919,
    "threshold": 0.3,
}
THRESHOLD: float = MODEL["threshold"]


class HitLike(Protocol):
    """What the decision reads of a search hit."""

    dense_score: float | None
    dense_rank: int | None
    keyword_rank: int | None


@dataclass(frozen=True)
class Relevance:
    """The features, the probability that the passages can answer, and the decision at ``threshold``."""

    features: dict[str, float]
    score: float
    threshold: float

    @property
    def relevant(self) -> bool:  # noqa: D102
        return self.score >= self.threshold


def features(question: str, hits: Sequence[HitLike], passages: Sequence[Passage]) -> dict[str, float]:
    """The signals for ``question`` over the hits kept (best first) and the passages packed from them."""
    cosines = sorted((h.dense_score for h in hits if h.dense_score is not None), reverse=True)
    cos1 = cosines[0] if cosines else 0.0
    margin = cos1 - cosines[1] if len(cosines) > 1 else cos1
    wanted = terms(question)
    texts = [squash(p.text) for p in passages]

    def share(haystacks: list[str]) -> float:
        if not wanted:
            return 1.0
        return sum(any(present(t, h) for h in haystacks) for t in wanted) / len(wanted)

    top = hits[0] if hits else None
    agree = float(top is not None and top.dense_rank == 1 and top.keyword_rank == 1)
    return {"cos1": round(cos1, 4), "margin": round(margin, 4), "cover_top": round(share(texts[:1]), 4),
            "cover_all": round(share(texts), 4), "legs_agree": agree}


def probability(feats: dict[str, float], model: dict[str, Any] | None = None) -> float:
    """The fitted logistic regression's probability that the passages can answer."""
    m = MODEL if model is None else model
    z = m["intercept"] + sum(c * (feats[name] - mean) / scale for name, mean, scale, c in zip(
        m["features"], m["means"], m["scales"], m["coefs"], strict=True))
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, z))))


def decide(question: str, hits: Sequence[HitLike], passages: Sequence[Passage], threshold: float) -> Relevance:
    """The decision for one question (``threshold`` 0: every question goes to the model)."""
    feats = features(question, hits, passages)
    return Relevance(feats, round(probability(feats), 4), threshold)
