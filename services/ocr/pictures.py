"""Pictures on a page that show a person: ID photos and other photographs, and faces — found by their pixels.

A résumé's ID photo is personal data the text detector cannot see. What tells a photograph from
the rest of a page is its *tones*: text, charts, logos and signatures are ink on paper (a few tones,
thin strokes, most of their box paper), a photograph covers its box densely with many tones. So:

1. the page is scaled to :data:`WIDTH` pixels wide and the paper's brightness estimated everywhere
   (a max filter then a blur: uneven light and tinted paper follow);
2. a pixel is *on* where it is darker than the paper by more than :data:`DARKER` grey levels or three
   times the page's noise (a grey scan's sensor noise stays off);
3. blocks of :data:`BLOCK` pixels whose share of *on* pixels is at least :data:`DENSE` are joined
   into regions (a closing, then holes filled);
4. a region at least :data:`MIN_SIDE` blocks on each side is a **photo** when its box is at least
   :data:`FILL` on and its on pixels' tones spread over at least :data:`TONES` bits (the entropy of a
   32-bin histogram); it is masked one block beyond its box on every side (a photo's edge blocks are
   not all dense). OCR's words are not asked: Tesseract reads "words" inside photos, and on the tune
   split no text, chart or logo came near the fill a photo has;
5. **faces** (OpenCV's bundled frontal-face Haar cascade, ``cv2.data``) outside every photo are
   findings of their own (a face in a phone photo of a page, a portrait without a frame).

No weights are fetched: the cascade ships in the ``opencv`` package. The constants were chosen on
the tune split of bench/picture_set.py; figures are reported on its report split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image

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
    """A picture found: ``photo`` or ``face``, its box, and how sure (a fixed score per kind and measure)."""

    kind: str
    box: Box
    score: float


@lru_cache(maxsize=1)
def _faces():
    import cv2

    return cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")


def _entropy(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    hist = np.bincount((values.astype(np.int32) // 8).clip(0, 31), minlength=32).astype(np.float64)
    p = hist[hist > 0] / hist.sum()
    return float(-(p * np.log2(p)).sum())


def _inside(a: Box, b: Box) -> float:
    """The share of ``a`` inside ``b``."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(0, w) * max(0, h) / max(1, a[2] * a[3])


def find(image: Image.Image, *, faces: bool = True) -> list[Picture]:
    """The photos and faces of a page image (boxes in its pixels)."""
    import cv2

    scale = min(1.0, WIDTH / image.width)
    small = image.convert("L").resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                                      Image.Resampling.BILINEAR)
    g = np.asarray(small, np.float32)
    paper = cv2.blur(cv2.dilate(g, np.ones((31, 31), np.uint8)), (31, 31))
    noise = float(np.median(np.abs(g - cv2.medianBlur(g.astype(np.uint8), 3).astype(np.float32))))
    on = (paper - g) > max(DARKER, 3 * 1.4826 * noise)
    h, w = on.shape
    bh, bw = h // BLOCK, w // BLOCK
    if bh == 0 or bw == 0:
        return []
    density = on[:bh * BLOCK, :bw * BLOCK].reshape(bh, BLOCK, bw, BLOCK).mean(axis=(1, 3))
    dense = (density >= DENSE).astype(np.uint8)
    dense = cv2.morphologyEx(dense, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(dense, connectivity=8)
    out: list[Picture] = []
    for k in range(1, count):
        bx, by, bwk, bhk, _ = stats[k]
        if bwk < MIN_SIDE or bhk < MIN_SIDE:
            continue
        y0, y1, x0, x1 = by * BLOCK, (by + bhk) * BLOCK, bx * BLOCK, (bx + bwk) * BLOCK
        region = on[y0:y1, x0:x1]
        fill = float(region.mean())
        tones = _entropy(g[y0:y1, x0:x1][region])
        if fill >= FILL and tones >= TONES:
            left, top = max(0, x0 - BLOCK), max(0, y0 - BLOCK)
            right, bottom = min(w, x1 + BLOCK), min(h, y1 + BLOCK)
            box = (math.floor(left / scale), math.floor(top / scale), math.ceil((right - left) / scale),
                   math.ceil((bottom - top) / scale))
            out.append(Picture("photo", box, round(min(0.99, 0.6 + 0.4 * fill), 3)))
    if faces:  # at half the search width: a face on a page is 20 px or more there, and it costs a quarter
        half = cv2.resize(np.asarray(small), (max(1, w // 2), max(1, h // 2)), interpolation=cv2.INTER_AREA)
        found = _faces().detectMultiScale(cv2.equalizeHist(half), scaleFactor=1.15, minNeighbors=6,
                                          minSize=(20, 20))
        for x, y, fw, fh in found if len(found) else []:
            box = (math.floor(2 * x / scale), math.floor(2 * y / scale), math.ceil(2 * fw / scale),
                   math.ceil(2 * fh / scale))
            if all(_inside(box, p.box) < 0.5 for p in out):
                out.append(Picture("face", box, 0.8))
    return out
