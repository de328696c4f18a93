"""Passages for a grounded answer: sentence windows cut from the hits, deduplicated, packed within a budget.

Pure functions (no I/O): the hits come from search, the passages go into the prompt, and each
keeps its character span in the document so a citation points at the text it used.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

# A sentence ends at . ! ? (and their full-width forms) followed by white space, or at a line break.
SENTENCE_END = re.compile(r"(?<![.!?。！？])[.!?。！？]++(?=\s)|\n++")  # a run of marks taken once, whole
NEAR_DUPLICATE = 0.85  # Jaccard of character trigrams above which a passage repeats one already kept
DEDUP_CHARS = 2000  # how much of each hit the near-duplicate test reads (copies share their openings)


@dataclass(frozen=True)
class Passage:
    """A window of one document's text, numbered from 1 in the prompt."""

    n: int
    doc_id: str
    start: int
    end: int
    text: str
    score: float
    dense_score: float | None
    payload: dict[str, Any] = field(default_factory=dict)


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, leading and trailing white space outside the span."""
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


def bigrams(text: str) -> set[str]:
    """Character bigrams of the text without white space (Korean words share stems, not whole forms)."""
    t = "".join(unicodedata.normalize("NFKC", text).casefold().split())
    return {t[i:i + 2] for i in range(len(t) - 1)}


def _scores(text: str, spans: list[tuple[int, int]], query: str) -> list[int]:
    """For each sentence, how many of the query's bigrams it holds (white space inside one allowed).

    One regular-expression scan of the whole text (overlapping matches, case-insensitive), each match
    assigned to its sentence: linear in the text, with no per-sentence set to build.
    """
    q = bigrams(query)
    scores = [0] * len(spans)
    if not q:
        return scores
    pattern = re.compile("(?=(" + "|".join(re.escape(b[0]) + r"\s*" + re.escape(b[1]) for b in sorted(q)) + "))",
                         re.IGNORECASE)
    starts = [s for s, _ in spans]
    seen: list[set[str]] = [set() for _ in spans]
    for m in pattern.finditer(text):
        k = bisect.bisect_right(starts, m.start()) - 1
        if k >= 0 and m.start() < spans[k][1]:
            seen[k].add("".join(m.group(1).split()).casefold())
    return [len(x) for x in seen]


def window(text: str, query: str, cap: int) -> tuple[int, int]:
    """The span of whole sentences, at most ``cap`` characters, sharing the most with the query.

    Scores are query-bigram overlaps per sentence; among windows that fit, the highest total wins
    (the earliest on ties). A single sentence longer than ``cap`` is cut at the last space before it.
    """
    if len(text) <= cap:
        return 0, len(text)
    spans = sentences(text)
    if not spans:
        return 0, 0
    scores = _scores(text, spans, query)
    best, best_score, j, total = (0, 0), -1, 0, 0
    for i in range(len(spans)):  # two pointers, a running total: linear in the sentences
        if j < i:
            j, total = i, 0
        while j < len(spans) and spans[j][1] - spans[i][0] <= cap:
            total += scores[j]
            j += 1
        if j > i and total > best_score:
            best, best_score = (i, j), total
        if j > i:
            total -= scores[i]  # sentence i leaves the window
    if best_score < 0:  # no whole sentence fits: the best sentence, cut
        i = max(range(len(spans)), key=lambda k: scores[k])
        s, e = spans[i]
        cut = text.rfind(" ", s, s + cap)
        return s, cut if cut > s else s + cap
    return spans[best[0]][0], spans[best[1] - 1][1]


def trigrams(text: str) -> set[str]:
    """Character trigrams without white space (the near-duplicate test)."""
    t = "".join(unicodedata.normalize("NFKC", text).casefold().split())
    return {t[i:i + 3] for i in range(max(1, len(t) - 2))}


def near_duplicate(a: set[str], b: set[str]) -> bool:
    """Whether two trigram sets overlap at least :data:`NEAR_DUPLICATE` (Jaccard)."""
    return bool(a and b) and len(a & b) / len(a | b) >= NEAR_DUPLICATE


@dataclass(frozen=True)
class Hit:
    """What packing needs of a search hit."""

    doc_id: str
    text: str
    score: float
    dense_score: float | None
    payload: dict[str, Any]
    span: tuple[int, int] | None = None  # the passage search matched, [start, end) in ``text``; None: all of it


def pack(hits: list[Hit], query: str, budget: int) -> tuple[list[Passage], int]:
    """Passages from ``hits`` (best first) within ``budget`` characters, and how many near-duplicates were dropped.

    A hit whose opening (:data:`DEDUP_CHARS`) nearly repeats one kept before is dropped; each other
    hit gets an even share of what is left (a short one leaves the rest to those after it); the
    window of its share that shares most with the query is used. A hit of a document stored as
    passages gives the passage search matched (its ``span``), not a window of the whole document;
    offsets stay the document's. Linear in the hits' length.
    """
    kept: list[Passage] = []
    grams: list[set[str]] = []
    dropped = 0
    unique = []
    for h in hits:
        lo, hi = h.span if h.span is not None else (0, len(h.text))
        g = trigrams(h.text[lo:min(hi, lo + DEDUP_CHARS)])
        if any(near_duplicate(g, other) for other in grams):
            dropped += 1
            continue
        grams.append(g)
        unique.append(h)
    left = budget
    for i, h in enumerate(unique):
        cap = left // (len(unique) - i)
        if cap < 20:
            break
        lo, hi = h.span if h.span is not None else (0, len(h.text))
        s, e = window(h.text[lo:hi], query, cap)
        s, e = s + lo, e + lo
        if e <= s:
            continue
        kept.append(Passage(len(kept) + 1, h.doc_id, s, e, h.text[s:e], h.score, h.dense_score, h.payload))
        left -= e - s
    return kept, dropped
