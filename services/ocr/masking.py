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


def _per_line(boxes: list[Box]) -> list[Box]:
    """Boxes grouped into runs on one line (a box whose middle is below the run's bottom starts a new one)."""
    runs: list[list[Box]] = []
    for b in boxes:
        if runs and b[1] + b[3] / 2 <= max(r[1] + r[3] for r in runs[-1]) and b[0] >= runs[-1][-1][0] - b[3]:
            runs[-1].append(b)
        else:
            runs.append([b])
    return [union(r) for r in runs]


def _located(text: str, boxes: list[Box | None], policy: Policy) -> list[Located]:
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
                               or _per_line(chars)))  # type: ignore[arg-type]
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
            found += _located(text, boxes, policy)
    kept: list[Located] = []
    for f in sorted(found, key=lambda f: (-f.score, -f.box[2] * f.box[3])):
        if all(_overlap(f.box, k.box) < 0.5 for k in kept):
            kept.append(f)
    return sorted(kept, key=lambda f: (f.box[1] // 10, f.box[0]))


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
