"""How plausible recognised Korean text is: the failure signal Tesseract's confidence is not.

Tesseract reports ≈ 85-95 confidence on Korean pages it misread, so the fallback trigger also asks
whether the text *looks like Korean*: the share of its characters that sit in implausible pieces.

- Hangul morphemes that the Korean analyser already in the mesh (Kiwi) can only explain as very
  unlikely nouns (a per-syllable log-probability below ``min_syllable_logp``: "결흔기념일", "별빚북스");
- isolated jamo ("ㅁ", "ㅜㅜ"), which real text almost never contains;
- Latin look-alikes in Korean text ("가볍고" -> "HAD"): on a mostly-Hangul page, Latin words that
  Tesseract itself was unsure of (confidence under ``latin_confidence``), and one- or two-letter
  Latin fragments;
- stray symbols ("|", "]", "~", "_").

The analyser (~1-3 s to load) is created lazily, once per process, off the event loop.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

HANGUL = re.compile(r"[가-힣]")
JAMO = re.compile(r"[ㄱ-ㆎ]")
LATIN_WORD = re.compile(r"^[A-Za-z]+$")
JUNK = re.compile(r"[|\]\[{}~_<>\\^`'\"=+*#@$]")


@dataclass(frozen=True)
class Plausibility:
    """Share of implausible characters in a text, and what made them so."""

    implausible_share: float
    hangul_share: float
    characters: int
    reasons: tuple[str, ...] = ()


class KoreanPlausibility:
    """Scores recognised text; thread-safe (one Kiwi behind a lock, loaded on first use)."""

    def __init__(self, min_syllable_logp: float = -9.5, latin_confidence: float = 85.0) -> None:
        self.min_syllable_logp = min_syllable_logp
        self.latin_confidence = latin_confidence
        self._kiwi = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the analyser now (warm-up), not on the first page."""
        with self._lock:
            if self._kiwi is None:
                from kiwipiepy import Kiwi

                self._kiwi = Kiwi()

    def _morphemes(self, text: str) -> list[tuple[str, str, float]]:
        self.load()
        with self._lock:
            assert self._kiwi is not None
            return [(t.form, t.tag, float(t.score)) for t in self._kiwi.tokenize(text)]

    def score(self, text: str, words: list[tuple[str, float]] | None = None) -> Plausibility:
        """Plausibility of ``text``; ``words`` are Tesseract's (word, confidence) pairs when known."""
        chars = "".join(text.split())
        if not chars:
            return Plausibility(0.0, 0.0, 0)
        hangul = len(HANGUL.findall(chars))
        hangul_share = hangul / len(chars)
        bad = {"jamo": len(JAMO.findall(chars)), "junk": len(JUNK.findall(chars)), "unlikely": 0, "latin": 0}
        if hangul:
            for line in text.splitlines():
                if not HANGUL.search(line):
                    continue
                for form, tag, logp in self._morphemes(line):
                    syllables = len(HANGUL.findall(form))
                    if syllables >= 2 and tag.startswith("NN") and logp / syllables < self.min_syllable_logp:
                        bad["unlikely"] += syllables
        if hangul_share >= 0.5:
            for word, confidence in words if words is not None else [(w, 0.0) for w in text.split()]:
                token = word.strip(".,:;!?()%")
                if LATIN_WORD.match(token) and (len(token) <= 2 or confidence < self.latin_confidence):
                    bad["latin"] += len(token)
        share = min(1.0, sum(bad.values()) / len(chars))
        return Plausibility(share, hangul_share, len(chars), tuple(k for k, v in bad.items() if v))
