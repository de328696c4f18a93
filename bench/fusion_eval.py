"""Fusion evaluation: every method on every set, cross-validated, with paired significance tests.

    python -m bench.fusion_eval --data ../shared/data [--out bench/results]

Sets, of different character:

- ``autorag-ko`` (shared data): 720 OCR'd pages of Korean PDFs, 114 questions; keyword-dominant.
- ``klue-sts-para`` (shared data, derived): KLUE-STS dev sentence pairs rated ≥ 3 (paraphrases):
  sentence1 is the query, its sentence2 the one relevant passage, among every other sentence.
- ``paraphrase-ko`` (``bench/data/paraphrase_ko.json``, written for the project): questions that
  paraphrase their passage in other words, among template-made distractors; dense-favoured.
- ``merged``: the three corpora in one collection, every query, each set's passages the others'
  distractors.

Runs in process: the service's analyser, BM25, Qdrant Edge (embedded) and ``HybridSearcher`` (the
same ``legs`` + ``finish`` a search runs), query and passage vectors from the int8 model in
process (cached under ~/.cache/korean-mesh/bench). Each query's two legs are fetched once and
every fusion is applied to the same legs.

What is tuned and where it is reported: AUTO's combiner (``AutoModel``: a logistic regression
of "the dense leg ranked the relevant passage better" on three per-query features) is fitted by
leave-one-set-out over the three base sets and reported on the held-out set (row ``auto``); the
model the service ships is fitted on all three (``--fit`` prints it; row ``auto (service model)``,
in-sample). The weighted fusion's dense weight and RRF's k are chosen the same way (rows
``weighted (CV)`` and ``rrf (CV)``). ``weighted 0.2`` is the old default, tuned on autorag-ko.
Significance: paired randomisation (sign-flip) test on per-query nDCG@10, 20,000 draws, two-sided,
and a bootstrap 95 % interval of the mean difference.

``--dense-chunks N`` measures a design option the service does not have: each passage split at
sentence ends into chunks of at most N characters, one vector per chunk, and the dense leg scoring a
passage by its best chunk (what a multi-vector MaxSim field would return for one query vector),
computed in process over the same int8 vectors; the keyword leg and every fusion as above, default
profile only. It writes ``fusion_eval_chunks<N>.{md,json}`` beside the main results.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import md_table
from bench.report import write_result
from bench.retrieval import embed_cached
from services.retrieval.fusion import LEG_CANDIDATES, AutoModel, ScoredDoc, auto_features, auto_fusion
from services.retrieval.hybrid import HybridSearcher
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.query import SearchQuery
from services.retrieval.store import StoredPoint, open_store
from services.runtime.models import current_model_dir

HERE = Path(__file__).resolve().parent
PROFILES = ("nouns+predicates", "nouns+predicates+units+compounds", "nouns+predicates+units")
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
RRF_KS = (1, 5, 10, 20, 30, 60, 100)
DRAWS = 20000
HINDSIGHT = "hindsight weight per query (ceiling)"


@dataclass
class EvalSet:
    """Passages (id, text) and queries (text, relevant ids)."""

    name: str
    passages: list[tuple[str, str]]
    queries: list[tuple[str, frozenset[str]]]


def load_autorag(data: Path) -> EvalSet:
    """autorag-ko pages and questions."""
    import pyarrow.parquet as pq

    corpus = pq.read_table(data / "autorag-ko" / "ocr_corpus_v3.parquet").to_pylist()
    qa = pq.read_table(data / "autorag-ko" / "qa_v4.parquet").to_pylist()
    return EvalSet("autorag-ko", [(f"a:{r['doc_id']}", r["contents"]) for r in corpus],
                   [(r["query"], frozenset(f"a:{d}" for g in r["retrieval_gt"] for d in g)) for r in qa])


def load_klue(data: Path) -> EvalSet:
    """KLUE-STS dev as paraphrase retrieval: pairs rated ≥ 3 give (sentence1 → sentence2)."""
    pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text(encoding="utf-8"))
    ids: dict[str, str] = {}

    def pid(text: str) -> str:
        return ids.setdefault(text, f"k:{len(ids):04d}")

    queries: dict[str, set[str]] = {}
    for p in pairs:
        pid(p["sentence2"])
        if p["labels"]["label"] >= 3.0:
            queries.setdefault(p["sentence1"], set()).add(pid(p["sentence2"]))
        else:
            pid(p["sentence1"])  # a low-rated first sentence is one more distractor
    passages = [(i, t) for t, i in ids.items()]
    return EvalSet("klue-sts-para", passages, [(q, frozenset(r)) for q, r in queries.items()])


def load_paraphrase() -> EvalSet:
    """The project's dense-favoured set."""
    raw = json.loads((HERE / "data" / "paraphrase_ko.json").read_text(encoding="utf-8"))
    return EvalSet("paraphrase-ko", [(f"p:{p['id']}", p["text"]) for p in raw["passages"]],
                   [(q["query"], frozenset(f"p:{r}" for r in q["relevant"])) for q in raw["queries"]])


def ndcg10(ids: list[str], relevant: frozenset[str]) -> tuple[float, float, float]:
    """nDCG@10, recall@10 and reciprocal rank@10 of one ranking (binary relevance)."""
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ids[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    found = sum(1 for d in ids[:10] if d in relevant)
    rr = next((1 / (i + 1) for i, d in enumerate(ids[:10]) if d in relevant), 0.0)
    return dcg / ideal, found / len(relevant), rr


def paired_test(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Two-sided sign-flip randomisation p-value of mean(a − b), and its bootstrap 95 % interval."""
    diff = a - b
    rng = np.random.default_rng(seed)
    observed = abs(diff.mean())
    if not diff.any():
        return 1.0, 0.0, 0.0
    signs = rng.choice((-1.0, 1.0), size=(DRAWS, len(diff)))
    p = (np.sum(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12) + 1) / (DRAWS + 1)
    boot = diff[rng.integers(0, len(diff), size=(DRAWS, len(diff)))].mean(axis=1)
    return float(p), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


class Catalog:
    """One set in an in-memory Qdrant Edge collection, indexed with one analyser profile."""

    def __init__(self, ev: EvalSet, analyzer: KoreanAnalyzer, vecs: np.ndarray, revision: str,
                 terms: list[list[str]]) -> None:
        self.store = open_store(":memory:", "edge")
        avg = float(np.mean([max(1, len(t)) for t in terms]))
        meta = self.store.create_catalog("eval", {}, revision, analyzer.info.label(), vecs.shape[1], avg)
        self.collection = meta.collection
        bm = Bm25(avg_doc_len=avg)
        points = []
        for (doc_id, text), vec, toks in zip(ev.passages, vecs, terms, strict=True):
            sp = bm.document(toks)
            points.append(StoredPoint(doc_id, text, {}, vec.tolist(), sp.indices, sp.values))
        for i in range(0, len(points), 256):
            self.store.upsert(self.collection, points[i:i + 256])
        self.searcher = HybridSearcher(self.store)

    def legs(self, text_terms: list[str], qvec: np.ndarray) -> dict[str, list[ScoredDoc]]:
        """Both legs of one query (the hybrid candidate depth the service uses)."""
        q = SearchQuery(text="x", top_k=10, mode="hybrid")
        return self.searcher.legs(self.collection, q, "hybrid", qvec.tolist(), Bm25.query(text_terms))


def methods() -> dict[str, dict[str, Any]]:
    """Fixed fusions evaluated (name -> SearchQuery fields); the legs and AUTO are added by the caller."""
    out: dict[str, dict[str, Any]] = {"dbsf": {"fusion": "dbsf"}}
    out.update({f"rrf k={k}": {"fusion": "rrf", "rrf_k": k} for k in RRF_KS})
    out.update({f"weighted {w}": {"fusion": "weighted", "dense_weight": w} for w in WEIGHTS})
    return out


@dataclass
class QueryLegs:
    """One query's legs and what AUTO's combiner learns from: features, and which leg did better."""

    legs: dict[str, list[ScoredDoc]]
    relevant: frozenset[str]
    n_terms: int
    size: int
    features: tuple[float, float, float]
    dense_gain: float  # nDCG@10 of the dense leg minus that of the keyword leg


def ranked_ids(q: SearchQuery, mode: str, ql: QueryLegs, model: AutoModel | None = None) -> list[str]:
    """Top 10 ids exactly as a search would return them (``model`` overrides AUTO's)."""
    legs = {k: v for k, v in ql.legs.items() if mode == "hybrid" or k == ("dense" if mode == "dense" else "keyword")}
    if not legs:
        return []
    if model is not None:
        return [d.doc_id for d in auto_fusion(legs.get("dense", []), legs.get("keyword", []), ql.n_terms, ql.size,
                                              model)[0][:10]]
    return [d.doc_id for d in HybridSearcher.finish(q, mode, legs, 10, ql.n_terms, ql.size).hits]


SENTENCE_END = re.compile(r"(?<=[.?!다])\s+|\n+")


def chunk_text(text: str, size: int) -> list[str]:
    """``text`` split at sentence ends (and newlines) into chunks of at most ``size`` characters.

    Sentences are packed greedily; a sentence longer than ``size`` stays whole (the model truncates it).
    """
    out: list[str] = []
    current = ""
    for part in (p.strip() for p in SENTENCE_END.split(text)):
        if not part:
            continue
        if current and len(current) + 1 + len(part) > size:
            out.append(current)
            current = part
        else:
            current = f"{current} {part}".strip()
    if current:
        out.append(current)
    return out or [text]


@dataclass
class Chunks:
    """Chunk vectors of a set's passages and, per chunk, the index of the passage it came from."""

    vecs: np.ndarray
    owner: np.ndarray

    def best_chunk_leg(self, ev: EvalSet, qvec: np.ndarray) -> list[ScoredDoc]:
        """The dense leg scoring each passage by its best chunk (cosine), top ``LEG_CANDIDATES``."""
        best = np.full(len(ev.passages), -2.0)
        np.maximum.at(best, self.owner, self.vecs @ qvec)
        top = sorted(range(len(best)), key=lambda j: (-best[j], ev.passages[j][0]))[:LEG_CANDIDATES]
        return [ScoredDoc(ev.passages[j][0], float(best[j]), ev.passages[j][1], {}) for j in top]


def collect(cat: Catalog, ev: EvalSet, qterms: list[list[str]], qvecs: np.ndarray,
            chunks: Chunks | None = None) -> list[QueryLegs]:
    """Both legs of every query of a set, once (``chunks``: the dense leg by best chunk instead)."""
    out = []
    for (_, relevant), terms, qvec in zip(ev.queries, qterms, qvecs, strict=True):
        legs = cat.legs(terms, qvec)
        if chunks is not None:
            legs["dense"] = chunks.best_chunk_leg(ev, qvec)
        n_terms = len(Bm25.query(terms).indices)
        ql = QueryLegs(legs, relevant, n_terms, len(ev.passages),
                       auto_features(legs.get("dense", []), legs.get("keyword", []), n_terms, len(ev.passages)), 0.0)
        ql.dense_gain = (ndcg10(ranked_ids(SearchQuery("x", mode="dense"), "dense", ql), relevant)[0]
                         - ndcg10(ranked_ids(SearchQuery("x", mode="keyword"), "keyword", ql), relevant)[0])
        out.append(ql)
    return out


def fit_auto(queries: list[QueryLegs], l2: float = 1.0, steps: int = 3000) -> AutoModel:
    """Logistic regression of "the dense leg ranked the relevant passage better" on AUTO's features.

    Each query is weighted by how much the better leg was better (ties carry no weight); features are
    standardised; L2 penalty ``l2`` on the coefficients; plain gradient descent (deterministic).
    """
    x = np.asarray([q.features for q in queries], dtype=np.float64)
    y = np.asarray([q.dense_gain > 0 for q in queries], dtype=np.float64)
    w = np.abs(np.asarray([q.dense_gain for q in queries], dtype=np.float64))
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.c_[(x - mean) / scale, np.ones(len(x))]
    beta = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ beta))
        beta -= 0.5 * (z.T @ ((p - y) * w) / w.sum() + l2 * np.r_[beta[:-1], 0.0] / len(x))
    return AutoModel(tuple(mean.round(6).tolist()), tuple(scale.round(6).tolist()),  # type: ignore[arg-type]
                     tuple(beta[:-1].round(6).tolist()), round(float(beta[-1]), 6))  # type: ignore[arg-type]


HINDSIGHT_WEIGHTS = tuple(round(0.05 * i, 2) for i in range(21))


def fixed_weight(w: float) -> AutoModel:
    """An AUTO model whose dense weight is ``w`` for every query (its combination rule, no features)."""
    logit = math.log(max(w, 1e-12) / max(1 - w, 1e-12))
    return AutoModel((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), max(-60.0, min(60.0, logit)))


def hindsight(queries: list[QueryLegs]) -> np.ndarray:
    """Per query, the best (nDCG@10, recall@10, RR@10) over dense weights 0, 0.05 … 1 with AUTO's rule.

    A ceiling, not a method: it picks each query's weight knowing the answer.
    """
    models = [fixed_weight(w) for w in HINDSIGHT_WEIGHTS]
    return np.asarray([max((ndcg10(ranked_ids(SearchQuery("x"), "hybrid", ql, m), ql.relevant) for m in models),
                           key=lambda r: r[0]) for ql in queries])


def evaluate(queries: list[QueryLegs], cv_model: AutoModel) -> dict[str, np.ndarray]:
    """Per-query (nDCG@10, recall@10, RR@10) of every method."""
    runs: dict[str, list[tuple[float, float, float]]] = {}
    for ql in queries:
        ids = {"dense": ranked_ids(SearchQuery("x", mode="dense"), "dense", ql),
               "keyword": ranked_ids(SearchQuery("x", mode="keyword"), "keyword", ql),
               "auto": ranked_ids(SearchQuery("x"), "hybrid", ql, cv_model),
               "auto (service model)": ranked_ids(SearchQuery("x", fusion="auto"), "hybrid", ql)}
        for name, params in methods().items():
            ids[name] = ranked_ids(SearchQuery("x", mode="hybrid", **params), "hybrid", ql)
        for name, got in ids.items():
            runs.setdefault(name, []).append(ndcg10(got, ql.relevant))
    return {name: np.asarray(v) for name, v in runs.items()}


def main() -> None:
    """Evaluate, cross-validate, test, write bench/results/fusion_eval.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.fusion_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--dense-chunks", type=int, default=0, metavar="CHARS",
                        help="measure the dense leg by best chunk of at most CHARS characters (default profile "
                             "only; writes fusion_eval_chunks<CHARS>.md)")
    parser.add_argument("--fit", action="store_true",
                        help="print AUTO's model fitted on all three base sets (for services/retrieval/hybrid.py)")
    args = parser.parse_args()
    started = time.perf_counter()
    model_dir = current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    base = [load_autorag(args.data), load_klue(args.data), load_paraphrase()]
    merged = EvalSet("merged", [p for s in base for p in s.passages], [q for s in base for q in s.queries])
    sets = [*base, merged]
    pvecs = {s.name: embed_cached([t for _, t in s.passages], False, model_dir, revision) for s in base}
    qvecs = {s.name: embed_cached([q for q, _ in s.queries], True, model_dir, revision) for s in base}
    pvecs["merged"] = np.concatenate([pvecs[s.name] for s in base])
    qvecs["merged"] = np.concatenate([qvecs[s.name] for s in base])
    chunks = chunk_vectors(base, args.dense_chunks, model_dir, revision) if args.dense_chunks else {}
    results: dict[str, dict[str, dict[str, np.ndarray]]] = {}  # profile -> set -> method -> per-query
    models: dict[str, dict[str, AutoModel]] = {}
    for profile in PROFILES if not (args.fit or args.dense_chunks) else PROFILES[-1:]:
        analyzer = KoreanAnalyzer(profile)
        t = time.perf_counter()
        pterms = {s.name: analyzer.terms_batch([x for _, x in s.passages]) for s in base}
        qterms = {s.name: analyzer.terms_batch([q for q, _ in s.queries]) for s in base}
        pterms["merged"] = [t for s in base for t in pterms[s.name]]
        qterms["merged"] = [t for s in base for t in qterms[s.name]]
        print(f"[bench] {profile}: analysed in {time.perf_counter() - t:.0f}s", flush=True)
        collected = {}
        for ev in sets:
            cat = Catalog(ev, analyzer, pvecs[ev.name], revision, pterms[ev.name])
            collected[ev.name] = collect(cat, ev, qterms[ev.name], qvecs[ev.name], chunks.get(ev.name))
            cat.store.close()
        if args.fit:
            print(fit_auto([q for s in base for q in collected[s.name]]))
            return
        # Leave one set out: the model that scores a base set never saw it; merged gets the all-sets model.
        models[profile] = {ev.name: fit_auto([q for s in base if s.name != ev.name for q in collected[s.name]])
                           for ev in sets}
        results[profile] = {}
        for ev in sets:
            results[profile][ev.name] = r = evaluate(collected[ev.name], models[profile][ev.name])
            if profile == PROFILES[-1]:
                r[HINDSIGHT] = hindsight(collected[ev.name])
            print(f"[bench] {profile} {ev.name}: " + " ".join(
                f"{m}={r[m][:, 0].mean():.3f}" for m in ("dense", "keyword", "auto", "auto (service model)", "dbsf",
                                                         "rrf k=60", "weighted 0.2")), flush=True)
    report(args, sets, results, models, revision, time.perf_counter() - started)


def chunk_vectors(base: list[EvalSet], size: int, model_dir: Path, revision: str) -> dict[str, Chunks]:
    """Every base set's chunk vectors (passage vectors of the int8 model), and merged's, concatenated."""
    out = {}
    for ev in base:
        texts, owner = [], []
        for j, (_, text) in enumerate(ev.passages):
            parts = chunk_text(text, size)
            texts += parts
            owner += [j] * len(parts)
        out[ev.name] = Chunks(embed_cached(texts, False, model_dir, revision), np.asarray(owner))
        print(f"[bench] {ev.name}: {len(ev.passages)} passages in {len(texts)} chunks of <= {size} characters",
              flush=True)
    offsets = np.cumsum([0, *(len(ev.passages) for ev in base[:-1])])
    out["merged"] = Chunks(np.concatenate([out[ev.name].vecs for ev in base]),
                           np.concatenate([out[ev.name].owner + o for ev, o in zip(base, offsets, strict=True)]))
    return out


def cv_choice(by_set: dict[str, dict[str, np.ndarray]], held: str, base_names: list[str], prefix: str) -> str:
    """The method named ``prefix…`` with the best mean nDCG@10 over the base sets other than ``held``."""
    names = [m for m in next(iter(by_set.values())) if m.startswith(prefix)]
    train = [n for n in base_names if n != held]
    return max(names, key=lambda m: (float(np.mean([by_set[n][m][:, 0].mean() for n in train])), m))


def report(args, sets: list[EvalSet], results, models, revision: str, seconds: float) -> None:
    """Tables: every method on every set (default profile), analyser variants, CV, significance."""
    profile = PROFILES[-1]
    base_names = [s.name for s in sets if s.name != "merged"]
    by_set = results[profile]
    shown = ["dense", "keyword", "auto", "auto (service model)", "dbsf", "rrf k=60", "weighted 0.2", "weighted 0.5",
             HINDSIGHT]
    lines = [f"- {seconds / 60:.1f} min; embedding int8 `{revision}` in process; Qdrant Edge in memory; analyser "
             f"`kiwipiepy` profile `{profile}` unless said otherwise; top 10 from 50 candidates per leg.",
             "- Sets: " + "; ".join(f"`{s.name}` {len(s.passages)} passages, {len(s.queries)} queries"
                                    for s in sets) + ".",
             "- What is tuned where: `auto` is a logistic combiner (three per-query features: keyword strength, "
             "dense peak, query length; see `AutoModel` in services/retrieval/hybrid.py). Row `auto` on a base "
             "set uses a model fitted on the two OTHER base sets only (leave-one-set-out); on `merged` it uses "
             "the model fitted on all three base sets, which `merged` contains (in-sample). Row `auto (service "
             "model)` is the model the service ships, fitted on all three base sets: in-sample everywhere, shown "
             "for reference only. `weighted (CV)` and `rrf (CV)` pick their parameter the same leave-one-set-out "
             "way. `weighted 0.2` is the old service default, tuned on autorag-ko by an earlier run. "
             f"`{HINDSIGHT}` is not a method: each query's dense weight (0, 0.05 … 1, AUTO's rule) chosen "
             "knowing the answer, the most any per-query weighting of these two legs could reach.", ""]
    if args.dense_chunks:
        lines[-1:-1] = [f"- **Dense leg by best chunk** (not a service feature): each passage split at sentence ends "
                        f"into chunks of at most {args.dense_chunks} characters, one vector per chunk, a passage "
                        "scored by its best chunk; AUTO refitted on these legs the same leave-one-set-out way. "
                        f"The chunk size was set before any run, not chosen on a set."]
    rows = []
    for ev in sets:
        r = by_set[ev.name]
        held = ev.name if ev.name in base_names else ""
        w = cv_choice(by_set, held, base_names, "weighted ")
        k = cv_choice(by_set, held, base_names, "rrf k=")
        for name, key in [*((m, m) for m in shown), (f"weighted (CV: {w.split()[1]})", w),
                          (f"rrf (CV: {k.split('=')[1]})", k)]:
            m = r[key].mean(axis=0)
            rows.append([ev.name, name, f"{m[0]:.3f}", f"{m[1]:.3f}", f"{m[2]:.3f}"])
    lines += ["## Every method on every set", "",
              md_table(["set", "method", "nDCG@10", "recall@10", "MRR@10"], rows), ""]
    sig_rows = []
    sig_json = {}
    for ev in sets:
        r = by_set[ev.name]
        best = max(("dense", "keyword"), key=lambda m: r[m][:, 0].mean())
        for name in ("auto", "auto (service model)", "dbsf", "rrf k=60", "weighted 0.2"):
            p, lo, hi = paired_test(r[name][:, 0], r[best][:, 0])
            delta = float(r[name][:, 0].mean() - r[best][:, 0].mean())
            sig_rows.append([ev.name, name, best, f"{delta:+.3f}", f"[{lo:+.3f}, {hi:+.3f}]", f"{p:.4f}",
                             "yes" if delta >= 0.005 else "no",
                             "yes" if p < 0.05 and delta < 0 else "no"])
            sig_json[f"{ev.name}|{name}"] = {"best_leg": best, "delta": delta, "ci95": [lo, hi], "p": p}
    lines += ["## Against the best single leg (nDCG@10, paired)", "",
              "`Δ` = method − best leg; p from a two-sided sign-flip randomisation test; target: "
              "Δ ≥ +0.005 and never significantly below (p < 0.05 with Δ < 0).", "",
              md_table(["set", "method", "best leg", "Δ nDCG@10", "95 % CI", "p", "≥ +0.005", "significantly below"],
                       sig_rows), ""]
    prof_rows = []
    for prof in results:
        for ev in sets:
            r = results[prof][ev.name]
            prof_rows.append([prof, ev.name, *(f"{r[m][:, 0].mean():.3f}" for m in ("keyword", "auto", "dbsf"))])
    lines += ["## Analyser profiles (nDCG@10)", "",
              "Each profile indexes every set anew; `auto` is leave-one-set-out within the profile.", "",
              md_table(["term profile", "set", "keyword", "auto", "dbsf"], prof_rows), "",
              "## AUTO's models", "",
              md_table(["profile", "fitted without", "mean", "scale", "coef", "bias"],
                       [[prof, name if name != "merged" else "— (all three base sets)", str(m.mean), str(m.scale),
                         str(m.coef), f"{m.bias:g}"] for prof, by in models.items() for name, m in by.items()]), ""]
    stem = f"fusion_eval_chunks{args.dense_chunks}" if args.dense_chunks else "fusion_eval"
    print(write_result(stem, "Fusion evaluation", lines, {
        "revision": revision,
        "sets": {s.name: {"passages": len(s.passages), "queries": len(s.queries)} for s in sets},
        "mean": {prof: {name: {m: v.mean(axis=0).round(4).tolist() for m, v in r.items()}
                        for name, r in by.items()} for prof, by in results.items()},
        "paired": sig_json,
        "models": {prof: {name: vars(m) for name, m in by.items()} for prof, by in models.items()}}, out=args.out))


if __name__ == "__main__":
    main()
