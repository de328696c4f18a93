"""Korean analyzer: Kiwi morphological analysis -> normalised index terms.

Qdrant has no Korean analyser (particles stay attached: 학교에 ≠ 학교), so the service tokenises
itself: Unicode NFKC, Latin lower-cased, particles and endings dropped, content morphemes kept.
Which morphemes count as content is a measured choice (see ``TERM_PROFILES`` and bench/retrieval).
"""

from __future__ import annotations

import importlib.metadata
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass

# Tag prefixes kept as index terms, per profile. Kiwi's tag set (Sejong-based):
# NNG/NNP common/proper nouns, NR numerals, SL foreign letters, SN numbers, SH hanja, XR roots,
# VV/VA verb/adjective stems, MAG general adverbs, W_* URLs/e-mail/hashtags/serials.
TERM_PROFILES: dict[str, tuple[str, ...]] = {
    "nouns": ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_"),
    "nouns+predicates": ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_", "VV", "VA"),
    "content": ("NNG", "NNP", "NNB", "NR", "NP", "SL", "SN", "SH", "XR", "W_", "VV", "VA", "MAG"),
}
DEFAULT_PROFILE = "nouns+predicates"


@dataclass(frozen=True)
class AnalyzerInfo:
    """What the analyzer is, recorded with every collection (a mismatch is refused)."""

    name: str
    version: str
    profile: str

    def label(self) -> str:
        """``kiwipiepy-0.24.1/nouns+predicates``."""
        return f"{self.name}-{self.version}/{self.profile}"


def normalise(text: str) -> str:
    """NFKC (full-width forms, compatibility jamo) and lower-cased Latin."""
    return unicodedata.normalize("NFKC", text).lower()


class KoreanAnalyzer:
    """Thread-safe wrapper around one Kiwi instance (Kiwi's own analysis is not re-entrant)."""

    def __init__(self, profile: str = DEFAULT_PROFILE) -> None:
        from kiwipiepy import Kiwi

        if profile not in TERM_PROFILES:
            raise ValueError(f"unknown term profile {profile!r}; one of {sorted(TERM_PROFILES)}")
        self.profile = profile
        self._keep = TERM_PROFILES[profile]
        self._kiwi = Kiwi()
        self._lock = threading.Lock()
        self.info = AnalyzerInfo("kiwipiepy", importlib.metadata.version("kiwipiepy"), profile)

    def terms(self, text: str) -> list[str]:
        """Index terms of a text, in order (repeats kept, for term frequency)."""
        with self._lock:
            tokens = self._kiwi.tokenize(normalise(text))
        out = []
        for tok in tokens:
            if tok.tag.startswith(self._keep):
                # Predicates are indexed by stem (먹었다, 먹는 -> 먹); tags like VV-R share it.
                out.append(tok.form)
        return out

    def terms_batch(self, texts: list[str]) -> list[list[str]]:
        """Index terms of many texts."""
        return [self.terms(t) for t in texts]

    def term_counts(self, text: str) -> Counter[str]:
        """Term frequencies of a text."""
        return Counter(self.terms(text))
