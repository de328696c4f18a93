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


@dataclass
class Line:
    """A recognised text line: text, confidence 0–100 and box (left, top, width, height) in input pixels."""

    text: str
    confidence: float
    box: tuple[int, int, int, int]


@dataclass
class Recognition:
    """What Tesseract read from one image."""

    text: str
    mean_confidence: float
    lines: list[Line] = field(default_factory=list)
    word_confidences: list[float] = field(default_factory=list)
    words: list[tuple[str, float]] = field(default_factory=list)  # (text, confidence) per word


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
            lines: list[Line] = []
            if text:
                it = api.GetIterator()
                while True:
                    if it.IsAtBeginningOf(tesserocr.RIL.TEXTLINE):
                        try:
                            line_text = (it.GetUTF8Text(tesserocr.RIL.TEXTLINE) or "").strip()
                        except RuntimeError:  # an empty region
                            line_text = ""
                        if line_text:
                            x1, y1, x2, y2 = it.BoundingBox(tesserocr.RIL.TEXTLINE)
                            lines.append(Line(line_text, float(it.Confidence(tesserocr.RIL.TEXTLINE)),
                                              (x1, y1, x2 - x1, y2 - y1)))
                    try:
                        word = it.GetUTF8Text(tesserocr.RIL.WORD)
                        if word:
                            words.append((word, float(it.Confidence(tesserocr.RIL.WORD))))
                    except RuntimeError:
                        pass
                    if not it.Next(tesserocr.RIL.WORD):
                        break
        return Recognition(text=text, mean_confidence=mean if text else 0.0, lines=lines,
                           word_confidences=[c for _, c in words], words=words)

    def close(self) -> None:
        """Release every engine."""
        for q in [self._free, *self._extra.values()]:
            while not q.empty():
                q.get_nowait().End()
