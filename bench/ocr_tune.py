"""Choose the OCR service's data-driven defaults on the *tuning* split only (in process, no gRPC).

    python -m bench.ocr_tune [--per-category 12]

Prints CER per category for line-normalisation targets and the fallback trigger's precision and
recall for thresholds of the implausible-character share; bench/ocr.py then reports the chosen
values on the report split. The tuning split shares no text or seed with the report split.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from bench.ocr_set import CATEGORIES, build_set, cer
from services.ocr.engine import TesseractPool
from services.ocr.enhance import Enhance
from services.ocr.extractor import FallbackPolicy, prepare_page
from services.ocr.imaging import Preprocess
from services.ocr.plausibility import KoreanPlausibility

FAILURE_CER = 0.2


def main() -> None:
    """Sweep on the tuning split and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.ocr_tune", description=__doc__)
    parser.add_argument("--per-category", type=int, default=12)
    args = parser.parse_args()
    samples = build_set(args.per_category, "tune")
    pool = TesseractPool("", "kor+eng", 1)
    scorer = KoreanPlausibility()
    prep = Preprocess()
    pages = []  # (cer, recognition, plausibility) of every variant, for the detector
    for name, enhance in {"lines 40": Enhance(line_height=40), "lines 48": Enhance(line_height=48),
                          "never as-is, lines 48": Enhance(clean_range=-1)}.items():
        per_cat: dict[str, list[float]] = {c: [] for c in CATEGORIES}
        for s in samples:
            rec = pool.recognize(prepare_page(s.image, prep, enhance).image)
            per_cat[s.category].append(cer(s.truth, rec.text))
            pages.append((per_cat[s.category][-1], rec, scorer.score(rec.text, rec.words)))
        print(f"{name:18s}", " ".join(f"{c}={statistics.mean(v):.3f}" for c, v in per_cat.items()),
              f"all={statistics.mean(x for v in per_cat.values() for x in v):.3f}", flush=True)
    for s in samples:  # plain Tesseract's pages add failures to learn the detector from
        rec = pool.recognize(s.image)
        pages.append((cer(s.truth, rec.text), rec, scorer.score(rec.text, rec.words)))
    failed = sum(c > FAILURE_CER for c, _, _ in pages)
    print(f"detector on {len(pages)} tuning pages, {failed} with CER > {FAILURE_CER}")
    for threshold in (0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25):
        policy = replace(FallbackPolicy(), max_implausible=threshold)
        flagged = [(c, bool(policy.failure(r, p))) for c, r, p in pages]
        tp = sum(f and c > FAILURE_CER for c, f in flagged)
        fp = sum(f and c <= FAILURE_CER for c, f in flagged)
        print(f"max_implausible={threshold:.2f} recall={tp / max(1, failed):.2f} precision={tp / max(1, tp + fp):.2f} "
              f"flagged={tp + fp}")
    pool.close()


if __name__ == "__main__":
    main()
