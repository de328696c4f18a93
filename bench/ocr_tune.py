"""Choose the OCR service's data-driven defaults on the *tuning* split only (in process, no gRPC).

    python -m bench.ocr_tune [--per-category 24]

Reads every tuning page twice, as the service prepares it and as uploaded (plain Tesseract), and
prints:

1. CER per category read each way, and when the page read as uploaded is kept alone from a
   quality bar on (``--accept-as-uploaded``; the rest keep the better reading: the sweep over skew
   bounds and quality weights that chose that comparison is retired, its choice recorded below);
2. the fallback trigger's precision and recall, for pages with CER > 0.2, over thresholds of
   ``max_uncovered`` and ``min_plausible_confidence``.

bench/ocr.py then reports the chosen values on the report split, which shares no text or seed
with this one. Chosen on this split with 24 pages per category (2026-12-01; 12 per category gave
only 9 failed readings to learn the trigger from): compare whatever the skew (``compare_as_uploaded``;
bounds of 0.3, 2 and 5 degrees read worse), weight 100 (50 and 200 gave the same or worse),
``max_uncovered`` 0.15 and ``min_plausible_confidence`` 70 (the highest F1 of the trigger: recall 0.87,
precision 0.87; 0.10-0.20 gave the same).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from bench.ocr_set import CATEGORIES, build_set, cer
from services.ocr.engine import TesseractPool
from services.ocr.enhance import Enhance, Prepared
from services.ocr.extractor import FallbackPolicy, prepare_page
from services.ocr.imaging import Preprocess
from services.ocr.plausibility import KoreanPlausibility
from services.ocr.quality import Reading, ink_of, judge

FAILURE_CER = 0.2


def quality(reading: Reading, weight: float) -> float:
    """The service's quality score with another weight for the two discounts."""
    return reading.rec.mean_confidence - weight * (reading.plausibility.implausible_share + reading.uncovered)


def main() -> None:
    """Read the tuning split both ways, then sweep the choices and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.ocr_tune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-category", type=int, default=24)
    args = parser.parse_args()
    samples = build_set(args.per_category, "tune")
    pool = TesseractPool("", "kor+eng", 1)
    scorer = KoreanPlausibility()
    pages = []  # (sample, prepared reading, as-uploaded reading)
    for s in samples:
        prepared = prepare_page(s.image, Preprocess(), Enhance())
        mine = judge(prepared, pool.recognize(prepared.image), scorer, ink_of(prepared.image))
        upload = Prepared(image=s.image, page_size=s.image.size, steps=["as_is"], flat=prepared.flat)
        plain = judge(upload, pool.recognize(s.image), scorer, ink_of(prepared.flat))
        pages.append((s, mine, plain))
    pool.close()

    print(f"CER per category on {len(samples)} tuning pages (as uploaded = plain Tesseract)")
    base = {c: [(cer(s.truth, m.rec.text), cer(s.truth, p.rec.text)) for s, m, p in pages if s.category == c]
            for c in CATEGORIES}
    print(f"{'prepared only':28s}", " ".join(f"{c}={statistics.mean(m for m, _ in v):.3f}" for c, v in base.items()))
    print(f"{'as uploaded only':28s}", " ".join(f"{c}={statistics.mean(p for _, p in v):.3f}" for c, v in base.items()))
    print("\nthe page read as uploaded kept alone when its quality reaches a bar (issue 67; the rest as above)")
    for bar in (60.0, 70.0, 75.0, 80.0, 85.0, 88.0, 90.0, 92.0, None):
        per_cat: dict[str, list[float]] = {c: [] for c in CATEGORIES}
        alone = 0
        for s, mine, plain in pages:
            steps = mine.prepared.steps
            eligible = "inverted" not in steps and "lines" not in steps
            if eligible and bar is not None and plain.quality >= bar:
                alone += 1
                pick = plain
            else:
                pick = plain if eligible and plain.quality > mine.quality else mine
            per_cat[s.category].append(cer(s.truth, pick.rec.text))
        print(f"{f'accept as uploaded >= {bar}':28s}", " ".join(f"{c}={statistics.mean(v):.3f}"
                                                                for c, v in per_cat.items()),
              f"all={statistics.mean(x for v in per_cat.values() for x in v):.3f} alone={alone}/{len(pages)}",
              flush=True)

    judged = [(cer(s.truth, r.rec.text), r) for s, mine, plain in pages for r in (mine, plain)]
    failed = sum(c > FAILURE_CER for c, _ in judged)
    print(f"\ndetector on {len(judged)} readings (prepared and as uploaded), {failed} with CER > {FAILURE_CER}")
    for max_uncovered in (0.05, 0.1, 0.15, 0.2, 0.3):
        for min_plausible in (60.0, 65.0, 68.0, 70.0, 72.0, 75.0, 78.0):
            policy = replace(FallbackPolicy(), max_uncovered=max_uncovered, min_plausible_confidence=min_plausible)
            flagged = [(c, bool(policy.judge(r))) for c, r in judged]
            tp = sum(f and c > FAILURE_CER for c, f in flagged)
            fp = sum(f and c <= FAILURE_CER for c, f in flagged)
            print(f"max_uncovered={max_uncovered:.2f} min_plausible_confidence={min_plausible:.0f} "
                  f"recall={tp / max(1, failed):.2f} precision={tp / max(1, tp + fp):.2f} flagged={tp + fp}")


if __name__ == "__main__":
    main()
