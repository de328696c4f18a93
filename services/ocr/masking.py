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

from PIL import Image, ImageDraw

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


# Tesseract's Korean model often splits one word into syllables ("여 권 번호", "홍 길 동"), which hides
# labels and names from the detector: two words closer than this share of the line's character height
# are joined without a space. Chosen on the tune split of bench/masking_set.py (bench/results/masking_tune.md).
JOIN_GAP = 0.2


def _chars(word: Word) -> list[Box]:
    return word.chars if len(word.chars) == len(word.text) else [word.box] * len(word.text)


def page_text(page: PageResult, join_gap: float | None = None) -> tuple[str, list[Box | None]]:
    """The page's text from its words, and each character's box (None for the spaces and newlines added).

    Words of a line are joined by a space unless the gap between them is under ``join_gap`` (default
    :data:`JOIN_GAP`) times the line's median character height.
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
            if previous is not None and chars[0][0] - (previous[0] + previous[2]) >= gap_share * height:
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


def _per_line(boxes: list[Box]) -> list[Box]:
    """Boxes grouped into runs on one line (a box whose middle is below the run's bottom starts a new one)."""
    runs: list[list[Box]] = []
    for b in boxes:
        if runs and b[1] + b[3] / 2 <= max(r[1] + r[3] for r in runs[-1]) and b[0] >= runs[-1][-1][0] - b[3]:
            runs[-1].append(b)
        else:
            runs.append([b])
    return [union(r) for r in runs]


def locate(page: PageResult, policy: Policy) -> list[Located]:
    """The personal data on one page with its boxes (a VLM page has no boxes: nothing to locate)."""
    text, boxes = page_text(page)
    if not text.strip():
        return []
    spans = detect(text, policy)
    hidden = mask(text, spans, policy.keep)
    shown = {i for i, (a, b) in enumerate(zip(mask(text, spans), hidden, strict=True)) if a != b} if policy.keep \
        else set()
    out = []
    for s in spans:
        chars = [boxes[i] for i in range(s.start, s.end) if boxes[i] is not None]
        if not chars:
            continue
        out.append(Located(s.kind, s.score, s.rule, text[s.start:s.end], union(chars),  # type: ignore[arg-type]
                           _hidden_runs(boxes, text, hidden, shown, s.start, s.end) or _per_line(chars)))  # type: ignore[arg-type]
    return out


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
            out += _per_line(run) if run else []
            run = []
        elif hidden[i] != text[i] or run:
            run.append(box)
    return out + (_per_line(run) if run else [])


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
