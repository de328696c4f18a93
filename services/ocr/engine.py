"""Tesseract through tesserocr: a fixed pool of loaded engines, one image per engine at a time.

Loading ``kor`` takes ~1 s, so engines are created once per worker slot and reused; tesserocr
releases the GIL while recognising, so slots run in parallel threads.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import tesserocr
from PIL import Image

DEFAULT_TESSDATA = "/usr/share/tesseract-ocr/5/tessdata"


def find_tessdata(configured: str = "") -> str:
    """The tessdata folder: the setting, ``TESSDATA_PREFIX``, or Debian's location."""
    for candidate in (configured, os.environ.get("TESSDATA_PREFIX", ""), DEFAULT_TESSDATA):
        if candidate and os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError("no tessdata folder: install tesseract-ocr-kor (scripts/setup.sh does) "
                            "or set MESH_OCR_TESSDATA")


Box = tuple[int, int, int, int]  # left, top, width, height


@dataclass
class Word:
    """A recognised word: text, confidence 0–100, box and one box per character (same pixel space as its line)."""

    text: str
    confidence: float
    box: Box
    chars: list[Box] = field(default_factory=list)


@dataclass
class Line:
    """A recognised text line: text, confidence 0–100 and box (left, top, width, height) in input pixels.

    ``words`` are its words with their boxes; ``image_box`` is the line's box in the uploaded image's
    pixels (after EXIF orientation), set once the page is mapped back (:mod:`services.ocr.extractor`),
    as are the words' boxes then.
    """

    text: str
    confidence: float
    box: Box
    words: list[Word] = field(default_factory=list)
    image_box: Box | None = None


@dataclass
class Recognition:
    """What Tesseract read from one image."""

    text: str
    mean_confidence: float
    lines: list[Line] = field(default_factory=list)
    word_confidences: list[float] = field(default_factory=list)
    words: list[tuple[str, float]] = field(default_factory=list)  # (text, confidence) per word


def _box(it: tesserocr.PyResultIterator, level: int) -> Box | None:
    found = it.BoundingBox(level)
    if not found:
        return None
    x1, y1, x2, y2 = found
    return x1, y1, x2 - x1, y2 - y1


def _text(it: tesserocr.PyResultIterator, level: int) -> str:
    try:
        return (it.GetUTF8Text(level) or "").strip()
    except RuntimeError:  # an empty region
        return ""


def _walk(it: tesserocr.PyResultIterator, words: list[tuple[str, float]]) -> list[Line]:
    """Lines with their words and each word's characters, one pass over the result (symbol by symbol)."""
    ril = tesserocr.RIL
    lines: list[Line] = []
    line: Line | None = None
    word: Word | None = None
    while True:
        if it.IsAtBeginningOf(ril.TEXTLINE):
            line_text, box = _text(it, ril.TEXTLINE), _box(it, ril.TEXTLINE)
            line = Line(line_text, float(it.Confidence(ril.TEXTLINE)), box) if line_text and box else None
            if line is not None:
                lines.append(line)
        if it.IsAtBeginningOf(ril.WORD):
            word_text, box = _text(it, ril.WORD), _box(it, ril.WORD)
            word = None
            if word_text:
                confidence = float(it.Confidence(ril.WORD))
                words.append((word_text, confidence))
                if line is not None and box:
                    word = Word(word_text, confidence, box)
                    line.words.append(word)
        if word is not None:
            box = _box(it, ril.SYMBOL)
            for _ in _text(it, ril.SYMBOL) if box else ():  # a symbol of several code points: one box each
                word.chars.append(box)  # type: ignore[arg-type]
        if not it.Next(ril.SYMBOL):
            break
    for ln in lines:
        for w in ln.words:  # symbols that do not spell the word's text: one share of its box per character
            if len(w.chars) != len(w.text):
                w.chars = split_box(w.box, len(w.text))
            else:
                w.chars = tighten(w.chars, w.text)
                w.box = (min(c[0] for c in w.chars), min(c[1] for c in w.chars),
                         max(c[0] + c[2] for c in w.chars) - min(c[0] for c in w.chars),
                         max(c[1] + c[3] for c in w.chars) - min(c[1] for c in w.chars))
    return lines


def tighten(chars: list[Box], text: str) -> list[Box]:
    """Character boxes with the LSTM's stretched ones cut back to their word's usual size.

    Tesseract's LSTM gives a word's last symbol whatever is left of the word's box (often twice a
    character's width, into the space after it) and some symbols a box taller than their neighbours':
    a box wider than 1.8 times the word's median character width keeps that width from its left edge,
    and a digit or Hangul syllable taller than 1.15 times the median height is cut to the median top
    and bottom (Latin letters keep theirs: ascenders and descenders differ by design).
    """
    full = [c for c in chars if c[2] > 2 and c[3] > 5]  # not dashes, dots or slivers
    if len(full) < 3:
        return chars
    width = sorted(c[2] for c in full)[len(full) // 2]
    height = sorted(c[3] for c in full)[len(full) // 2]
    top = sorted(c[1] for c in full)[len(full) // 2]
    out = []
    for (x, y, w, h), ch in zip(chars, text, strict=True):
        if w > 1.8 * width:
            w = width
        if h > 1.15 * height and (ch.isdigit() or "\uac00" <= ch <= "\ud7a3"):
            y, h = max(y, top), min(y + h, top + height) - max(y, top)
        out.append((x, y, w, max(1, h)))
    return out


def split_box(box: Box, n: int) -> list[Box]:
    """``n`` equal slices of ``box`` from left to right."""
    x, y, w, h = box
    edges = [x + round(w * k / max(n, 1)) for k in range(n + 1)]
    return [(edges[k], y, max(1, edges[k + 1] - edges[k]), h) for k in range(n)]


class TesseractPool:
    """``size`` loaded engines per language set; :meth:`recognize` blocks until one is free."""

    def __init__(self, tessdata: str, languages: str, size: int, psm: int = tesserocr.PSM.SINGLE_BLOCK) -> None:
        self.tessdata = find_tessdata(tessdata)
        available = set(tesserocr.get_languages(self.tessdata)[1])
        missing = [lang for lang in languages.split("+") if lang not in available]
        if missing:
            raise FileNotFoundError(f"tessdata in {self.tessdata} lacks {missing} (has {sorted(available)})")
        self.languages = languages
        self.available = available
        self.psm = psm
        self.size = size
        self._free: queue.Queue[tesserocr.PyTessBaseAPI] = queue.Queue()
        self._lock = threading.Lock()
        self._extra: dict[str, queue.Queue[tesserocr.PyTessBaseAPI]] = {}
        for _ in range(size):
            self._free.put(self._new(languages))

    def _new(self, languages: str) -> tesserocr.PyTessBaseAPI:
        return tesserocr.PyTessBaseAPI(path=self.tessdata, lang=languages, psm=self.psm)

    def _queue_for(self, languages: str) -> queue.Queue[tesserocr.PyTessBaseAPI]:
        if languages == self.languages:
            return self._free
        with self._lock:  # another language set: its own (lazily filled) pool of the same size
            q = self._extra.get(languages)
            if q is None:
                q = self._extra[languages] = queue.Queue()
                for _ in range(self.size):
                    q.put(self._new(languages))
            return q

    @contextmanager
    def engine(self, languages: str | None = None) -> Iterator[tesserocr.PyTessBaseAPI]:
        """Borrow a loaded engine."""
        q = self._queue_for(languages or self.languages)
        api = q.get()
        try:
            yield api
        finally:
            api.Clear()
            q.put(api)

    def recognize(self, image: Image.Image, languages: str | None = None) -> Recognition:
        """Text, mean confidence, lines with boxes and word confidences of one (preprocessed) image."""
        with self.engine(languages) as api:
            api.SetImage(image)
            api.Recognize()
            text = api.GetUTF8Text().strip()
            mean = float(api.MeanTextConf())
            words: list[tuple[str, float]] = []
            lines = _walk(api.GetIterator(), words) if text else []
        return Recognition(text=text, mean_confidence=mean if text else 0.0, lines=lines,
                           word_confidences=[c for _, c in words], words=words)

    def read_line(self, image: Image.Image, whitelist: str, languages: str = "eng") -> list[Word]:
        """The words of one line of text (page segmentation: a single line), only ``whitelist``'s characters.

        For re-reading a value where a label says one should be (services/ocr/rereads.py); the engine's
        settings are put back before it returns to the pool.
        """
        with self.engine(languages) as api:
            api.SetPageSegMode(tesserocr.PSM.SINGLE_LINE)
            api.SetVariable("tessedit_char_whitelist", whitelist)
            try:
                api.SetImage(image)
                api.Recognize()
                text = api.GetUTF8Text().strip()
                lines = _walk(api.GetIterator(), []) if text else []
            finally:
                api.SetVariable("tessedit_char_whitelist", "")
                api.SetPageSegMode(self.psm)
        return [w for ln in lines for w in ln.words]

    def close(self) -> None:
        """Release every engine."""
        for q in [self._free, *self._extra.values()]:
            while not q.empty():
                q.get_nowait().End()
