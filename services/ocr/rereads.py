"""A second read where a label says a value should be and the first read found none.

Tesseract's Korean model misreads what résumés put after a label: an e-mail's ``@`` or dots, a
letter read as a digit, a landline's leading 0. When a line holds a label of a kind (이메일,
연락처, 주민등록번호, 여권번호 …: the recognizers' own context words, plus the e-mail and phone labels
below) and no finding of that kind lies after it, the rest of the line is read again as one line,
scaled to :data:`LINE_HEIGHT` pixels, by the ``eng`` model with only the characters that kind is
written in (:data:`WHITELISTS`); the detector then runs on "label + that reading", for that kind
only, and its findings are mapped to boxes as the first read's are (the re-read's characters mapped
back to the page; a ``keep`` policy masks only what it hides), their rule marked ``:reread``.

Nothing here logs or keeps the text.
"""

from __future__ import annotations

import string
from dataclasses import replace

from PIL import Image

from services.ocr.engine import Box, TesseractPool
from services.ocr.extractor import PageResult
from services.ocr.masking import Located, located
from services.ocr.pii.detector import Policy
from services.ocr.pii.recognizers import BIRTH_WORDS, LICENSE_WORDS, PASSPORT_WORDS, RRN_WORDS

DIGITS = string.digits + "-. "
LABELS: dict[str, tuple[str, ...]] = {
    "email": ("이메일", "E-mail", "e-mail", "Email", "EMAIL", "E-Mail", "메일"),
    "phone": ("연락처", "전화", "휴대폰", "핸드폰", "휴대전화", "H.P", "Mobile", "Tel", "TEL"),
    "resident_number": RRN_WORDS,
    "passport": PASSPORT_WORDS,
    "driver_license": LICENSE_WORDS,
    "birth_date": BIRTH_WORDS,
}
WHITELISTS = {
    "email": string.ascii_letters + string.digits + "@._-+",
    "phone": DIGITS + "()+",
    "resident_number": DIGITS,
    "passport": string.ascii_uppercase + string.digits,
    "driver_license": DIGITS,
    "birth_date": DIGITS + "/",
}
LINE_HEIGHT = 48  # the re-read line's height in pixels (Tesseract reads best at 30-50 px characters)
MAX_REREADS = 6  # per page: the re-reads' cost stays bounded on a page full of labels


def _after(a: Box, b: Box) -> bool:
    """Whether box ``b`` lies on ``a``'s line and after it."""
    mid = b[1] + b[3] / 2
    return a[1] - a[3] / 2 <= mid <= a[1] + 1.5 * a[3] and b[0] + b[2] > a[0] + a[2]


def candidates(page: PageResult, found: list[Located], kinds: tuple[str, ...]) -> list[tuple[str, str, Box]]:
    """(kind, label, region after it) of each labelled line whose value the first read did not find."""
    out: list[tuple[str, str, Box]] = []
    for ln in page.lines:
        words = ln.words
        if not words:
            continue
        right = max(w.box[0] + w.box[2] for w in words)
        for kind, labels in LABELS.items():
            if kind not in kinds:
                continue
            at = next(((i, label) for i, w in enumerate(words) for label in labels if label in w.text), None)
            if at is None:
                continue
            i, label = at
            label_box = words[i].box
            if any(f.kind == kind and _after(label_box, f.box) for f in found):
                continue
            h = max(w.box[3] for w in words)
            end = max(right, label_box[0] + label_box[2] + 4 * h)
            region = (label_box[0] + label_box[2], label_box[1] - h // 3, end - label_box[0] - label_box[2],
                      h + 2 * (h // 3))
            out.append((kind, label, region))
    return out[:MAX_REREADS]


def reread(page: PageResult, image: Image.Image, found: list[Located], pool: TesseractPool,
           policy: Policy) -> list[Located]:
    """Findings the second reads add (see the module)."""
    out: list[Located] = []
    grey = image.convert("L")
    for kind, label, (x, y, w, h) in candidates(page, found, policy.kinds):
        x, y = max(0, x), max(0, y)
        w, h = min(w, grey.width - x), min(h, grey.height - y)
        if w < 8 or h < 8:
            continue
        scale = LINE_HEIGHT / h
        crop = grey.crop((x, y, x + w, y + h)).resize((max(1, round(w * scale)), LINE_HEIGHT),
                                                      Image.Resampling.LANCZOS)
        words = pool.read_line(crop, WHITELISTS[kind])
        if not words:
            continue
        # The text the detector reads: the label (its context) and the words, each character's page box kept.
        text = label + " "
        boxes: list[Box | None] = [None] * (len(label) + 1)
        for k, word in enumerate(words):
            if k:
                text += " "
                boxes.append(None)
            chars = word.chars if len(word.chars) == len(word.text) else [word.box] * len(word.text)
            text += word.text
            boxes += [(x + round(c[0] / scale), y + round(c[1] / scale), max(1, round(c[2] / scale)),
                       max(1, round(c[3] / scale))) for c in chars]
        # The same mapping as the first read's (a ``keep`` policy masks only what it hides).
        for f in located(text, boxes, replace(policy, kinds=(kind,))):
            out.append(replace(f, rule=f"{f.rule}:reread"))
    return out
