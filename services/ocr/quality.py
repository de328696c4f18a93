"""How good one reading of a page is, from the page and the reading alone (no ground truth).

Two signals beside Tesseract's confidence, which stays high on Korean it misread:

- the *implausible share* of the text (:mod:`services.ocr.plausibility`: pieces that do not look
  like Korean);
- the *uncovered ink*: the share of the page's ink outside every line Tesseract returned. A cover
  whose large title Tesseract dropped reads the rest at confidence 93; a third of its ink is then
  unexplained.

``quality`` (confidence − 100 × (implausible + uncovered)) ranks readings of the same page; the
fallback policy (:class:`services.ocr.extractor.FallbackPolicy`) turns the signals into a verdict.
The weights and thresholds were chosen on the tuning split of bench/ocr_set.py with
``python -m bench.ocr_tune`` and are reported on the report split (bench/results/ocr.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from services.ocr.engine import Line, Recognition
from services.ocr.enhance import Prepared
from services.ocr.plausibility import KoreanPlausibility, Plausibility

INK = 128  # a flattened page is dark ink on white


def uncovered_ink(ink: np.ndarray, lines: list[Line]) -> float:
    """Share of ``ink`` (a boolean mask) outside every line box (left, top, width, height); 0 without ink."""
    total = int(ink.sum())
    if total == 0:
        return 0.0
    covered = np.zeros_like(ink)
    for line in lines:
        x, y, w, h = line.box
        covered[max(0, y):y + h, max(0, x):x + w] = True
    return float((ink & ~covered).sum() / total)


def ink_of(image: Image.Image | None) -> np.ndarray | None:
    """The ink mask of a flattened image (None when the page was not flattened)."""
    return None if image is None else np.asarray(image.convert("L")) < INK


@dataclass(frozen=True)
class Reading:
    """One recognition of a page, from one prepared image, with its quality signals."""

    prepared: Prepared
    rec: Recognition
    plausibility: Plausibility
    uncovered: float

    @property
    def quality(self) -> float:
        """Confidence − 100 × (implausible share + uncovered ink share): higher reads the page better."""
        return self.rec.mean_confidence - 100.0 * (self.plausibility.implausible_share + self.uncovered)


def judge(prepared: Prepared, rec: Recognition, scorer: KoreanPlausibility, ink: np.ndarray | None) -> Reading:
    """The signals of one reading; ``ink`` is the mask in the coordinates of ``prepared.image``."""
    uncovered = 0.0 if ink is None else uncovered_ink(ink, rec.lines)
    return Reading(prepared, rec, scorer.score(rec.text, rec.words), uncovered)


def best(readings: list[Reading]) -> Reading:
    """The reading of highest quality; the first wins a tie."""
    return max(readings, key=lambda r: r.quality)
