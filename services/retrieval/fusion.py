"""Fusion of the dense and keyword legs (weighted, RRF, DBSF, AUTO), MMR diversity, and the fused result's types."""


from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.retrieval.query import SearchQuery
from services.retrieval.store import RawHit

LEG_CANDIDATES = 50  # each leg's candidates in a hybrid search (more when MMR or top_k asks for more)


@dataclass(frozen=True)
class AutoModel:
    """AUTO's combiner: the dense weight as a logistic function of three per-query features.

    Features (``auto_features``): how strongly the keyword leg matched (log of its top BM25
    score per distinct query term, over ln(1 + documents): the best a term can add grows with
    log N), how far the dense leg's best candidate stands out (its gap to the second, in standard
    deviations of the dense candidates), and the query's length (log of its distinct terms).
    Fitted by ``python -m bench.fusion_eval --fit`` (logistic regression on which leg ranked the
    relevant passage better, per query); the figures it reports for each set come from a model
    fitted without that set (leave-one-set-out).
    """

    mean: tuple[float, float, float]
    scale: tuple[float, float, float]
    coef: tuple[float, float, float]
    bias: float

    def dense_weight(self, features: tuple[float, float, float]) -> float:
        """Weight of the dense leg in [0, 1] (the keyword leg gets the rest)."""
        logit = self.bias + sum(c * (f - m) / s for f, m, s, c in
                                zip(features, self.mean, self.scale, self.coef, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))


# Fitted on autorag-ko, klue-sts-para and paraphrase-ko together (bench/results/fusion_eval.md).
# Signs: a stronger keyword match and a longer query lower the dense weight; a peaked dense leg raises it.
AUTO_MODEL = AutoModel(mean=(-1.111342, 1.982411, 2.067758), scale=(0.588466, 1.692599, 0.53726),
                       coef=(-1.247864, 1.359354, -1.98553), bias=1.070851)
FLAT_DENSE_GAP = 1.0  # only for the reason text: a dense best candidate less than 1σ ahead is "flat"


@dataclass
class LegResult:
    """Rank (1-based) and raw score of a document in one leg."""

    rank: int
    score: float


@dataclass(frozen=True)
class PassageRef:
    """Which passage of its document a hit is (or, for a document hit, the one that matched best).

    ``start``/``end`` are character offsets into the document's whole text; ``passages`` is how
    many the document has (1: the passage is the whole document).
    """

    ordinal: int
    start: int
    end: int
    passages: int
    text: str


@dataclass
class ScoredDoc:
    """A result with its final score and where it stood in each leg.

    ``key`` identifies it in fusion: the document id, or id and ordinal when passages are returned.
    """

    doc_id: str
    score: float
    text: str
    payload: dict[str, Any]
    dense: LegResult | None = None
    keyword: LegResult | None = None
    vector: np.ndarray | None = field(default=None, repr=False)
    passage: PassageRef | None = None
    key: str = ""

    def __post_init__(self) -> None:
        self.key = self.key or self.doc_id

    def best_rank(self) -> int:
        """The better of the two leg ranks (a large number when in neither leg)."""
        return min(r.rank if r else 1 << 30 for r in (self.dense, self.keyword))


@dataclass
class Ranked:
    """Fused hits, best first, and which fusion ran and why (hybrid only)."""

    hits: list[ScoredDoc]
    fusion: str | None = None
    reason: str = ""


def _doc(hit: RawHit, by_passage: bool = False) -> ScoredDoc:
    vec = None if hit.vector is None else np.asarray(hit.vector, dtype=np.float32)
    end = len(hit.text) + hit.start if hit.end < 0 else hit.end
    ref = PassageRef(hit.ordinal, hit.start, end, hit.passages, hit.text)
    return ScoredDoc(hit.doc_id, hit.score, hit.text, hit.payload, vector=vec, passage=ref,
                     key=f"{hit.doc_id}\x00{hit.ordinal}" if by_passage else hit.doc_id)


def best_passages(docs: list[ScoredDoc]) -> list[ScoredDoc]:
    """One hit per document, the first (best) of its passages in a leg's order: a document scores its best."""
    seen: set[str] = set()
    out = []
    for d in docs:
        if d.doc_id not in seen:
            seen.add(d.doc_id)
            out.append(d)
    return out


def stable_order(docs: list[ScoredDoc]) -> list[ScoredDoc]:
    """Best first; equal scores by best leg rank, then by id (the same order in every process)."""
    return sorted(docs, key=lambda d: (-d.score, d.best_rank(), d.key))


def _leg_sorted(docs: list[ScoredDoc]) -> list[ScoredDoc]:
    # Within one leg, equal scores are ordered by id so that leg ranks are reproducible too.
    return sorted(docs, key=lambda d: (-d.score, d.key))


def _pool(dense: list[ScoredDoc], keyword: list[ScoredDoc]) -> dict[str, ScoredDoc]:
    """Every candidate of either leg, with its leg ranks attached, as new result objects.

    A document whose best passage differs between the legs keeps the passage of the leg that
    ranked it higher (the dense leg's on a tie).
    """
    by_id: dict[str, ScoredDoc] = {}
    for name, docs in (("dense", dense), ("keyword", keyword)):
        for i, d in enumerate(docs):
            out = by_id.get(d.key)
            if out is None:
                out = by_id[d.key] = ScoredDoc(d.doc_id, 0.0, d.text, d.payload, vector=d.vector, passage=d.passage,
                                               key=d.key)
            elif out.dense is not None and i + 1 < out.dense.rank:
                out.text, out.passage, out.vector = d.text, d.passage, d.vector
            if out.vector is None:
                out.vector = d.vector
            setattr(out, name, LegResult(i + 1, d.score))
    return by_id


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    """Min-max to [0, 1]; when every score is equal (one document, say) each is the best: 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return dict.fromkeys(scores, 1.0)
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def weighted_fusion(dense: list[ScoredDoc], keyword: list[ScoredDoc], dense_weight: float) -> list[ScoredDoc]:
    """Weighted sum of min-max normalised leg scores (a document missing from a leg scores 0 there).

    A leg whose candidates all score the same (a one-document collection, a lone keyword match)
    gives each of them full credit (1), so a perfect lone match is never scored 0.
    """
    pool = _pool(dense, keyword)
    nd = _minmax({d.key: d.score for d in dense})
    nk = _minmax({d.key: d.score for d in keyword})
    for key, d in pool.items():
        d.score = dense_weight * nd.get(key, 0.0) + (1 - dense_weight) * nk.get(key, 0.0)
    return stable_order(list(pool.values()))


def rrf_fusion(dense: list[ScoredDoc], keyword: list[ScoredDoc], k: int) -> list[ScoredDoc]:
    """Reciprocal rank fusion: the sum over legs of 1 / (k + rank), rank 1-based."""
    pool = _pool(dense, keyword)
    for d in pool.values():
        d.score = sum(1.0 / (k + r.rank) for r in (d.dense, d.keyword) if r is not None)
    return stable_order(list(pool.values()))


def _dbsf_scale(scores: list[float]) -> list[float]:
    """Qdrant's DBSF normalisation: (s − (μ − 3σ)) / 6σ, clipped to [0, 1]; equal scores give 1."""
    if not scores:
        return []
    arr = np.asarray(scores, dtype=np.float64)
    sd = float(arr.std())
    if sd <= 1e-12 * max(1.0, float(np.abs(arr).max(initial=0.0))):
        return [1.0] * len(scores)
    return np.clip((arr - (arr.mean() - 3 * sd)) / (6 * sd), 0.0, 1.0).tolist()


def dbsf_fusion(dense: list[ScoredDoc], keyword: list[ScoredDoc]) -> list[ScoredDoc]:
    """Distribution-based score fusion: each leg scaled by its mean ± 3σ, then summed."""
    pool = _pool(dense, keyword)
    for docs in (dense, keyword):
        for d, s in zip(docs, _dbsf_scale([d.score for d in docs]), strict=True):
            pool[d.key].score += s
    return stable_order(list(pool.values()))


def auto_features(dense: list[ScoredDoc], keyword: list[ScoredDoc], n_terms: int,
                  collection_size: int) -> tuple[float, float, float]:
    """AUTO's per-query features: keyword strength, dense peak, query length (see :class:`AutoModel`)."""
    n_terms = max(1, n_terms)
    top_keyword = keyword[0].score if keyword else 0.0
    strength = math.log(top_keyword / n_terms / math.log(2.0 + max(0, collection_size)) + 1e-3)
    scores = np.asarray([d.score for d in dense], dtype=np.float64)
    sd = float(scores.std()) if len(scores) > 1 else 0.0
    gap = float((scores[0] - scores[1]) / sd) if sd > 1e-12 else 0.0
    return strength, gap, math.log(n_terms)


def auto_fusion(dense: list[ScoredDoc], keyword: list[ScoredDoc], n_terms: int = 0, collection_size: int = 0,
                model: AutoModel | None = None) -> tuple[list[ScoredDoc], str]:
    """Per query, the dense weight from the query's own evidence (:class:`AutoModel`); no per-collection tuning.

    Both legs are scored over the same pool (every candidate of either leg). A document the
    keyword leg did not return scores 0 there (BM25 without a shared term); one the dense leg did
    not return gets the dense leg's lowest returned cosine (it ranked below every returned one).
    The dense leg is min-max normalised over the pool, the keyword leg divided by its best score,
    so fused scores lie in [0, 1], a one-document collection scores 1 and a lone keyword match
    gets the whole keyword share.
    """
    model = model or AUTO_MODEL
    pool = _pool(dense, keyword)
    ids = list(pool)
    floor = min((d.score for d in dense), default=0.0)
    ds = {i: pool[i].dense.score if pool[i].dense else floor for i in ids}  # type: ignore[union-attr]
    ks = {i: pool[i].keyword.score if pool[i].keyword else 0.0 for i in ids}  # type: ignore[union-attr]
    features = auto_features(dense, keyword, n_terms, collection_size)
    if not keyword:
        w, why = 1.0, "no keyword match"
    elif not dense:
        w, why = 0.0, "no dense candidates"
    else:
        w = model.dense_weight(features)
        why = (f"keyword strength {math.exp(features[0]):.2f}, dense "
               f"{'flat' if features[1] < FLAT_DENSE_GAP else 'peaked'} ({features[1]:.2f}σ ahead), "
               f"{max(1, n_terms)} query terms")
    nd = _minmax(ds)
    top_k = max(ks.values(), default=0.0)
    for i in ids:
        pool[i].score = w * nd.get(i, 0.0) + (1 - w) * (ks[i] / top_k if top_k > 0 else 0.0)
    return stable_order(list(pool.values())), f"auto: {why} → dense weight {w:.2f}"


def mmr(docs: list[ScoredDoc], top_k: int, diversity: float) -> list[ScoredDoc]:
    """Maximal marginal relevance: trade relevance (the fused order) against similarity to picks."""
    if len(docs) <= 1 or any(d.vector is None for d in docs):
        return docs[:top_k]
    vecs = np.stack([d.vector for d in docs])  # type: ignore[misc]
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rel = np.array([d.score for d in docs], dtype=np.float64)
    rel = (rel - rel.min()) / ((rel.max() - rel.min()) or 1.0)
    sim = vecs @ vecs.T
    chosen: list[int] = []
    left = list(range(len(docs)))
    while left and len(chosen) < top_k:
        if chosen:
            penalty = sim[np.ix_(left, chosen)].max(axis=1)
        else:
            penalty = np.zeros(len(left))
        scores = (1 - diversity) * rel[left] - diversity * penalty
        pick = left[int(np.argmax(scores))]  # argmax takes the first of equals: the fused order decides
        chosen.append(pick)
        left.remove(pick)
    return [docs[i] for i in chosen]


def fuse(q: SearchQuery, dense: list[ScoredDoc], keyword: list[ScoredDoc], n_terms: int = 0,
         collection_size: int = 0) -> tuple[list[ScoredDoc], str]:
    """The fused candidates of a hybrid search and the reason string for the response."""
    if q.fusion == "auto":
        return auto_fusion(dense, keyword, n_terms, collection_size)
    if q.fusion == "rrf":
        return rrf_fusion(dense, keyword, q.rrf_k), f"requested rrf (k {q.rrf_k})"
    if q.fusion == "dbsf":
        return dbsf_fusion(dense, keyword), "requested dbsf"
    return weighted_fusion(dense, keyword, q.dense_weight), f"requested weighted (dense weight {q.dense_weight:g})"
