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


BACKENDS = {"kiwi": "kiwipiepy", "mecab": "python-mecab-ko"}


class KoreanAnalyzer:
    """Thread-safe wrapper around one morphological analyser: Kiwi (default) or MeCab-ko."""

    def __init__(self, profile: str = DEFAULT_PROFILE, backend: str = "kiwi") -> None:
        if profile not in TERM_PROFILES:
            raise ValueError(f"unknown term profile {profile!r}; one of {sorted(TERM_PROFILES)}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown analyser {backend!r}; one of {sorted(BACKENDS)}")
        self.profile = profile
        self.backend = backend
        self._keep = TERM_PROFILES[profile]
        self._lock = threading.Lock()
        if backend == "kiwi":
            from kiwipiepy import Kiwi

            self._kiwi = Kiwi()
        else:
            import mecab

            self._mecab = mecab.MeCab()
        self.info = AnalyzerInfo(BACKENDS[backend], importlib.metadata.version(BACKENDS[backend]), profile)

    def _morphemes(self, text: str) -> list[tuple[str, str]]:
        """(form, tag) pairs; MeCab's fused inflections are split back into their morphemes."""
        with self._lock:
            if self.backend == "kiwi":
                return [(t.form, t.tag) for t in self._kiwi.tokenize(text)]
            out = []
            for m in self._mecab.parse(text):
                expr = m.feature.expression
                if expr and "+" in m.feature.pos:
                    out += [(part.split("/")[0], part.split("/")[1]) for part in expr.split("+")]
                else:
                    out.append((m.surface, m.feature.pos))
            return out

    def terms(self, text: str) -> list[str]:
        """Index terms of a text, in order (repeats kept, for term frequency)."""
        # Predicates are indexed by stem (먹었다, 먹는 -> 먹); tags like VV-R share the prefix.
        return [form for form, tag in self._morphemes(normalise(text)) if tag.startswith(self._keep)]

    def terms_batch(self, texts: list[str]) -> list[list[str]]:
        """Index terms of many texts."""
        return [self.terms(t) for t in texts]

    def term_counts(self, text: str) -> Counter[str]:
        """Term frequencies of a text."""
        return Counter(self.terms(text))
