"""Personal data on a page image: the detector on the OCR text, each finding mapped back to boxes.

The page's text is rebuilt from its words (words joined by a space, lines by a newline), keeping for
every character the box Tesseract gave it (:class:`services.ocr.engine.Word` ``chars``, in the
uploaded image's pixels). :func:`services.ocr.pii.detector.detect` runs on that text; a finding's
box is the upright rectangle around the characters it spans (a part of a word when the word holds
more, e.g. ``연락처:010-…``), and what is blacked out is one box per line it spans — with the
``keep`` policy only the characters the masked text hides (:func:`services.ocr.pii.detector.mask`).

Nothing here logs or records the text or what was found.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

from services.ocr.engine import Box, Word
from services.ocr.extractor import PageResult
from services.ocr.pii.detector import Policy, detect, mask


@dataclass(frozen=True)
class Located:
    """One finding on the image."""

    kind: str
    score: float
    rule: str
    text: str
    box: Box
    masked: list[Box] = field(default_factory=list)


# Tesseract's Korean model often splits one word into syllables ("여 권 번호", "홍 길 동") and a number
# into pieces ("721013-1 582438"), which hides labels, names and numbers from the detector. The page is
# read twice: as Tesseract spaced it (two words closer than JOIN_GAP times the line's character height
# are joined: no space was printed there), and *glued* — two Hangul syllables, or two pieces of a
# number, closer than GLUE_GAP are joined too. Both chosen on the tune split of bench/masking_set.py.
JOIN_GAP = 0.15
GLUE_GAP = 0.8
_NUMBER = set("0123456789-.")


def _chars(word: Word) -> list[Box]:
    return word.chars if len(word.chars) == len(word.text) else [word.box] * len(word.text)


def _hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


def _glues(left: str, right: str) -> bool:
    return (_hangul(left) and _hangul(right)) or (left in _NUMBER and right in _NUMBER)


def page_text(page: PageResult, join_gap: float | None = None,
              glue_gap: float = 0.0) -> tuple[str, list[Box | None]]:
    """The page's text from its words, and each character's box (None for the spaces and newlines added).

    Words of a line are joined by a space unless the gap between them is under ``join_gap`` (default
    :data:`JOIN_GAP`) times the line's median character height, or under ``glue_gap`` times it where
    both sides are Hangul or both part of a number.
    """
    gap_share = JOIN_GAP if join_gap is None else join_gap
    parts: list[str] = []
    boxes: list[Box | None] = []
    for ln in page.lines:
        if not ln.words:
            continue
        if parts:
            parts.append("\n")
            boxes.append(None)
        heights = sorted(c[3] for w in ln.words for c in _chars(w))
        height = heights[len(heights) // 2]
        previous: Box | None = None
        for word in ln.words:
            chars = _chars(word)
            if previous is not None:
                gap = (chars[0][0] - (previous[0] + previous[2])) / max(1, height)
                if gap >= gap_share and not (gap < glue_gap and _glues(parts[-1][-1], word.text[0])):
                    parts.append(" ")
                    boxes.append(None)
            parts.append(word.text)
            boxes.extend(chars)
            previous = chars[-1]
    return "".join(parts), boxes


def union(boxes: list[Box]) -> Box:
    """The upright rectangle around ``boxes``."""
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    right, bottom = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
    return left, top, right - left, bottom - top


def per_line(boxes: list[Box]) -> list[Box]:
    """Boxes grouped into runs on one line (a box whose middle is below the run's bottom starts a new one)."""
    runs: list[list[Box]] = []
    for b in boxes:
        if runs and b[1] + b[3] / 2 <= max(r[1] + r[3] for r in runs[-1]) and b[0] >= runs[-1][-1][0] - b[3]:
            runs[-1].append(b)
        else:
            runs.append([b])
    return [union(r) for r in runs]


def located(text: str, boxes: list[Box | None], policy: Policy) -> list[Located]:
    """The policy's findings in ``text`` whose characters have ``boxes`` (None: a space the page text added)."""
    spans = detect(text, policy)
    hidden = mask(text, spans, policy.keep)
    shown = {i for i, (a, b) in enumerate(zip(mask(text, spans), hidden, strict=True)) if a != b} if policy.keep \
        else set()
    out = []
    for s in spans:
        chars = [boxes[i] for i in range(s.start, s.end) if boxes[i] is not None]
        if chars:
            out.append(Located(s.kind, s.score, s.rule, text[s.start:s.end], union(chars),  # type: ignore[arg-type]
                               _hidden_runs(boxes, text, hidden, shown, s.start, s.end)
                               or per_line(chars)))  # type: ignore[arg-type]
    return out


def _overlap(a: Box, b: Box) -> float:
    """The intersection's share of the smaller box."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(0, w) * max(0, h) / max(1, min(a[2] * a[3], b[2] * b[3]))


def locate(page: PageResult, policy: Policy) -> list[Located]:
    """The personal data on one page with its boxes (a VLM page has no boxes: nothing to locate).

    The findings of the page as spaced and as glued are merged: where two overlap, the higher score
    wins, then the larger box.
    """
    found: list[Located] = []
    for glue in (0.0, GLUE_GAP):
        text, boxes = page_text(page, glue_gap=glue)
        if text.strip():
            found += located(text, boxes, policy)
    kept: list[Located] = []
    for f in sorted(found, key=lambda f: (-f.score, -f.box[2] * f.box[3])):
        if all(_overlap(f.box, k.box) < 0.5 for k in kept):
            kept.append(f)
    return sorted(kept, key=lambda f: (f.box[1] // 10, f.box[0]))


def merged(first: list[Located], second: list[Located]) -> list[Located]:
    """Two readings' findings on one page, every finding of either masked.

    A finding of ``second`` overlapping one of ``first`` (half of the smaller box) is the same entity: it
    stays one finding, masked where either reading placed it. Used for a scan under a text layer (OCR's
    findings first, the layer's second), where the layer may misread or drop what the image shows.
    """
    out = list(first)
    for f in second:
        k = next((k for k, g in enumerate(out) if g.kind == f.kind and _overlap(f.box, g.box) >= 0.5), None)
        if k is None:
            out.append(f)
        else:
            g = out[k]
            extra = [b for b in f.masked if all(_overlap(b, m) < 0.9 for m in g.masked)]
            out[k] = Located(g.kind, max(g.score, f.score), g.rule, g.text, union([g.box, f.box]), g.masked + extra)
    return sorted(out, key=lambda f: (f.box[1] // 10, f.box[0]))


def _hidden_runs(boxes: list[Box | None], text: str, hidden: str, shown: set[int], start: int,
                 end: int) -> list[Box]:
    """Boxes over the hidden characters of ``text[start:end]``.

    A character the policy keeps readable (``shown``) ends a run; a separator inside one (a dash, a dot)
    is covered with it.
    """
    out: list[Box] = []
    run: list[Box] = []
    for i in range(start, end):
        box = boxes[i]
        if box is None:  # a space or line break the page text added: runs go on across it
            continue
        if i in shown:
            out += per_line(run) if run else []
            run = []
        elif hidden[i] != text[i] or run:
            run.append(box)
    return out + (per_line(run) if run else [])


FIT_MAX_SKEW = 0.5  # degrees: a page turned more keeps OCR's boxes (its ink does not lie in upright rows)
INK_PAD = 1  # pixels around the ink of a fitted box
GLYPH_GAP = 2  # pixels of paper inside one character a box's edge may cross (its strokes are closer)


def _ink(crop: np.ndarray) -> np.ndarray:
    """Which pixels of a grey crop are ink: darker than Otsu's split after a 3x3 median (noise is not ink).

    None when the crop is one tone (paper only, or ink only).
    """
    crop = ndimage.median_filter(np.asarray(crop, dtype=np.uint8), size=3)
    if int(crop.max()) - int(crop.min()) < 40:
        return np.zeros(crop.shape, bool)
    hist = np.bincount(crop.ravel(), minlength=256).astype(np.float64)
    weight = np.cumsum(hist)
    mean = np.cumsum(hist * np.arange(256))
    total = weight[-1]
    between = (mean[-1] * weight / total - mean) ** 2 / np.maximum(weight * (total - weight), 1)
    return crop <= int(np.argmax(between))


def _run(profile: np.ndarray, start: int, end: int, gap: int, grow: bool = True) -> tuple[int, int] | None:
    """The span of ``profile`` (ink per row or column) around ``[start, end)``, or None when it holds no ink.

    Trimmed to the ink inside, then grown while more ink follows within ``gap``.
    """
    inside = np.flatnonzero(profile[start:end])
    if inside.size == 0:
        return None
    lo, hi = start + int(inside[0]), start + int(inside[-1]) + 1
    while grow:  # grow while ink resumes within ``gap``
        before = np.flatnonzero(profile[max(0, lo - gap):lo])
        if before.size == 0:
            break
        lo = max(0, lo - gap) + int(before[0])
    while grow:
        after = np.flatnonzero(profile[hi:hi + gap])
        if after.size == 0:
            break
        hi = hi + int(after[-1]) + 1
    return lo, hi


def fit(grey: np.ndarray, box: Box, grow: bool = True) -> Box:
    """``box`` trimmed or grown to the ink of its characters (a projection of the binarised surroundings).

    Rows: the ink rows around the box's own, grown across gaps under a fifth of its height (a line's
    accents and descenders, not the next line, which a line gap keeps apart), at most half a height.
    Columns, within those rows: trimmed to the ink, and grown only through a character the box's edge
    cuts (gaps of :data:`GLYPH_GAP` pixels: the space between two characters, let alone two words,
    is wider), at most two heights; with ``grow`` false only trimmed (a partial mask must not spread
    over the characters the policy keeps readable). The box is unchanged where its surroundings hold no
    ink.
    """
    x, y, w, h = (int(v) for v in box)
    top, left = max(0, y - max(2, h // 2)), max(0, x - 2 * h)
    crop = grey[top:min(grey.shape[0], y + h + max(2, h // 2)), left:min(grey.shape[1], x + w + 2 * h)]
    if crop.size == 0:
        return box
    ink = _ink(crop)
    cols = slice(x - left, x - left + w)
    # A row counts with 2 % of the box's width in ink (a stray dot does not), a column with 2 pixels.
    row_ink = ink[:, cols].sum(axis=1) >= max(2, w // 50)
    rows = _run(row_ink, y - top, y - top + h, max(1, h // 5))
    if rows is None:
        return box
    span = _run(ink[rows[0]:rows[1]].sum(axis=0) >= 2, x - left, x - left + w, GLYPH_GAP, grow)
    if span is None:
        return box
    # One pixel around the ink (its anti-aliased edge; on the masking tune split 1 px gave 94.8 % of boxes
    # at IoU >= 0.8, the bare ink 89.1 %, a tenth of the height 85.8 %).
    out = (left + span[0] - INK_PAD, top + rows[0] - INK_PAD, span[1] - span[0] + 2 * INK_PAD,
           rows[1] - rows[0] + 2 * INK_PAD)
    # Kept only where it stays the same piece of ink: a fit that moved off the box is a misreading of the page.
    return out if _iou(out, (x, y, w, h)) >= 0.5 else box


def _iou(a: Box, b: Box) -> float:
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    inter = max(0, w) * max(0, h)
    return inter / max(1, a[2] * a[3] + b[2] * b[3] - inter)


def fitted(image: Image.Image, found: list[Located], grow: bool = True) -> list[Located]:
    """Every finding's box and masked boxes fitted to the ink (:func:`fit`); the page read once as grey.

    ``grow`` false (a ``keep`` policy): masked boxes are only trimmed.
    """
    if not found:
        return found
    grey = np.asarray(image.convert("L"))
    out = []
    for f in found:
        masked = [fit(grey, b, grow) for b in f.masked]
        box = fit(grey, f.box) if not grow or not masked else union(masked)
        out.append(Located(f.kind, f.score, f.rule, f.text, box, masked))
    return out


def masked_png(image: Image.Image, found: list[Located], pad: int = 2) -> bytes:
    """The page with every finding's masked boxes filled black, as PNG."""
    out = image.convert("RGB") if image.mode not in ("RGB", "L") else image.copy()
    draw = ImageDraw.Draw(out)
    for f in found:
        for x, y, w, h in f.masked:
            draw.rectangle((x - pad, y - pad, x + w + pad - 1, y + h + pad - 1), fill=0)
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=False, compress_level=3)
    return buf.getvalue()
