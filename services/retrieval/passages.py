"""Long documents as passages: sentence-aware pieces with their offsets, and the layout a catalog records.

A document longer than a passage is cut into passages of about ``chars`` characters at sentence
ends (``. ! ?`` and their full-width forms before white space, or a line break), consecutive
passages sharing up to ``overlap`` characters of whole sentences so that an answer spanning a cut
is whole in one of them. A sentence longer than a passage is cut at white space (hard when it has
none). A document up to ``chars * SHORT_SLACK`` characters stays one passage: most catalog
documents (titles, descriptions, reviews) are written exactly as they were before passages.

Pure functions: the retrieval service's writes, reindexes and benches call them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at . ! ? (and their full-width forms) followed by white space, or at a line break.
SENTENCE_END = re.compile(r"(?<![.!?。！？])[.!?。！？]++(?=\s)|\n++")  # a run of marks taken once, whole
SHORT_SLACK = 1.25  # a document up to chars * this stays one passage (no 20-character tail passages)

DOCUMENT_LAYOUT = "document"  # one point per document (collections written before passages)
PASSAGE_LAYOUT = "passages"  # one point per passage, grouped by document at search time


@dataclass(frozen=True)
class Layout:
    """How a catalog's documents become points; recorded with the catalog like its analyser and revision."""

    kind: str = PASSAGE_LAYOUT
    chars: int = 600
    overlap: int = 100

    def label(self) -> str:
        """As recorded: ``document``, or ``passages:<chars>/<overlap>``."""
        return DOCUMENT_LAYOUT if self.kind == DOCUMENT_LAYOUT else f"{PASSAGE_LAYOUT}:{self.chars}/{self.overlap}"

    @classmethod
    def parse(cls, label: str | None) -> Layout:
        """Inverse of :meth:`label`; a catalog that records none predates passages: one point per document."""
        if not label or label == DOCUMENT_LAYOUT:
            return cls(DOCUMENT_LAYOUT, 0, 0)
        kind, _, size = label.partition(":")
        chars, _, overlap = size.partition("/")
        if kind != PASSAGE_LAYOUT or not chars.isdigit() or not overlap.isdigit():
            raise ValueError(f"unknown collection layout {label!r}")
        return cls(PASSAGE_LAYOUT, int(chars), int(overlap))

    @property
    def passages(self) -> bool:
        """Whether documents are cut into passages."""
        return self.kind == PASSAGE_LAYOUT


@dataclass(frozen=True)
class Span:
    """One passage of a document: ``text[start:end]`` of the original, ``ordinal`` from 0."""

    ordinal: int
    start: int
    end: int


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, white space around it outside the span."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        piece = text[s:e]
        lead = len(piece) - len(piece.lstrip())
        trail = len(piece) - len(piece.rstrip())
        if e - trail > s + lead:
            out.append((s + lead, e - trail))
    return out


def _units(text: str, spans: list[tuple[int, int]], chars: int) -> list[tuple[int, int]]:
    """Sentences, those longer than ``chars`` cut at white space (hard when there is none)."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        while e - s > chars:
            cut = text.rfind(" ", s + chars // 2, s + chars)
            cut = s + chars if cut <= s else cut
            out.append((s, cut))
            s = cut
            while s < e and text[s].isspace():
                s += 1
        if e > s:
            out.append((s, e))
    return out


def split(text: str, chars: int, overlap: int) -> list[Span]:
    """The passages of ``text``: one when it is short, else sentence-aligned pieces of about ``chars``.

    Each passage after the first starts with the last whole sentences of the one before, up to
    ``overlap`` characters (none when the last sentence alone is longer). Linear in the text.
    """
    if chars <= 0 or len(text) <= chars * SHORT_SLACK:
        return [Span(0, 0, len(text))]
    units = _units(text, sentence_spans(text), chars)
    if not units:
        return [Span(0, 0, len(text))]
    out: list[Span] = []
    i = 0
    while i < len(units):
        j = i + 1  # units[i:j] is the passage; at least one unit
        while j < len(units) and units[j][1] - units[i][0] <= chars:
            j += 1
        out.append(Span(len(out), units[i][0], units[j - 1][1]))
        if j >= len(units):
            break
        back = j  # the next passage starts with the last sentences of this one, up to ``overlap``
        while back - 1 > i and units[j - 1][1] - units[back - 1][0] <= overlap:
            back -= 1
        i = back
    if len(out) > 1 and out[-1].end - out[-1].start < chars // 4:
        # A short tail joins the passage before it (it already overlaps it).
        last = out.pop()
        prev = out.pop()
        out.append(Span(prev.ordinal, prev.start, last.end))
    return out
