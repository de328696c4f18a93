"""Photographs on a page — an ID photo, a portrait, any picture of a person — found by their pixels.

A résumé's ID photo is personal data the text detector cannot see. What tells a photograph from
the rest of a page is its *tones*: text, charts, logos and signatures are ink on paper (a few tones,
thin strokes, most of their box paper), a photograph covers its box densely with many tones. So:

1. the page is scaled to :data:`WIDTH` pixels wide and the paper's brightness estimated everywhere
   (a max filter then a box blur: uneven light and tinted paper follow);
2. a pixel is *on* where it is darker than the paper by more than :data:`DARKER` grey levels or three
   times the page's noise (a grey scan's sensor noise stays off);
3. blocks of :data:`BLOCK` pixels whose share of *on* pixels is at least :data:`DENSE` are joined
   into regions (a closing, then 8-connected labels);
4. a region at least :data:`MIN_SIDE` blocks on each side is a **photo** when its box is at least
   :data:`FILL` on and its on pixels' tones spread over at least :data:`TONES` bits (the entropy of a
   32-bin histogram); it is masked one block beyond its box on every side (a photo's edge blocks are
   not all dense). OCR's words are not asked: Tesseract reads "words" inside photos, and on the tune
   split no text, chart or logo came near the fill a photo has.

A face is masked as part of the photograph it is in. A separate face detector (OpenCV's bundled
Haar cascade) was tried and found nothing the regions had not: no face finding on either split. It
was dropped because the service image cannot carry OpenCV's GUI-linked wheel, and the headless
wheel conflicts with the bench's. SciPy (already the page enhancement's) does the filtering. The
constants were chosen on the tune split of bench/picture_set.py; figures are reported on its report
split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage

Box = tuple[int, int, int, int]  # left, top, width, height (the uploaded image's pixels)

WIDTH = 620  # the page is searched at this width
BLOCK = 8  # block side, in pixels of the scaled page
DARKER = 28  # grey levels below the paper that make a pixel "on"
DENSE = 0.5  # share of on pixels that makes a block dense
MIN_SIDE = 5  # a region's least side, in blocks (40 px scaled: about 80 px on an A4 page at 150 dpi)
FILL = 0.7  # share of a photo's box that is on (photos 0.83-0.96, logos and charts 0.44-0.6 on tune)
TONES = 3.3  # entropy (bits, 32 bins) of a photo's tones (photos 3.75-4.35, dense logos and charts 1.3-2.85)


@dataclass(frozen=True)
class Picture:
    """A picture found: its kind (``photo``), its box, and how sure (from the share of its box that is on)."""

    kind: str
    box: Box
    score: float


def _entropy(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    hist = np.bincount((values.astype(np.int32) // 8).clip(0, 31), minlength=32).astype(np.float64)
    p = hist[hist > 0] / hist.sum()
    return float(-(p * np.log2(p)).sum())


def find(image: Image.Image) -> list[Picture]:
    """The photos of a page image (boxes in its pixels)."""
    scale = min(1.0, WIDTH / image.width)
    small = image.convert("L").resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                                      Image.Resampling.BILINEAR)
    g = np.asarray(small, np.float32)
    paper = ndimage.uniform_filter(ndimage.maximum_filter(g, size=31), size=31)
    noise = float(np.median(np.abs(g - ndimage.median_filter(g, size=3))))
    on = (paper - g) > max(DARKER, 3 * 1.4826 * noise)
    h, w = on.shape
    bh, bw = h // BLOCK, w // BLOCK
    if bh == 0 or bw == 0:
        return []
    density = on[:bh * BLOCK, :bw * BLOCK].reshape(bh, BLOCK, bw, BLOCK).mean(axis=(1, 3))
    dense = ndimage.binary_closing(density >= DENSE, structure=np.ones((3, 3), bool))
    labels, _ = ndimage.label(dense, structure=np.ones((3, 3), int))
    out: list[Picture] = []
    for rows, cols in ndimage.find_objects(labels):
        if cols.stop - cols.start < MIN_SIDE or rows.stop - rows.start < MIN_SIDE:
            continue
        y0, y1, x0, x1 = rows.start * BLOCK, rows.stop * BLOCK, cols.start * BLOCK, cols.stop * BLOCK
        region = on[y0:y1, x0:x1]
        fill = float(region.mean())
        tones = _entropy(g[y0:y1, x0:x1][region])
        if fill >= FILL and tones >= TONES:
            left, top = max(0, x0 - BLOCK), max(0, y0 - BLOCK)
            right, bottom = min(w, x1 + BLOCK), min(h, y1 + BLOCK)
            box = (math.floor(left / scale), math.floor(top / scale), math.ceil((right - left) / scale),
                   math.ceil((bottom - top) / scale))
            out.append(Picture("photo", box, round(min(0.99, 0.6 + 0.4 * fill), 3)))
    return out
