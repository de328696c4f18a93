"""Korean analyzer: Kiwi morphological analysis -> normalised index terms.

Qdrant has no Korean analyser (particles stay attached: 학교에 ≠ 학교), so the service tokenises
itself: Unicode NFKC, Latin lower-cased, particles and endings dropped, content morphemes kept.
Which morphemes count as content is a measured choice (see ``TERM_PROFILES`` and bench/retrieval).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass

# Tag prefixes kept as index terms, per profile. Kiwi's tag set (Sejong-based):
# NNG/NNP common/proper nouns, NR numerals, SL foreign letters, SN numbers, SH hanja, XR roots,
# VV/VA verb/adjective stems, MAG general adverbs, W_* URLs/e-mail/hashtags/serials.
_UNITS_TAGS = ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_", "VV", "VA", "NNB")
TERM_PROFILES: dict[str, tuple[str, ...]] = {
    "nouns": ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_"),
    "nouns+predicates": ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_", "VV", "VA"),
    "content": ("NNG", "NNP", "NNB", "NR", "NP", "SL", "SN", "SH", "XR", "W_", "VV", "VA", "MAG"),
    # nouns+predicates plus the bound nouns (NNB) that carry meaning: units and counters (리터, 갤런,
    # 킬로그램, 개, 권, 원, 명 …), and a number joined to the unit or counter after it (3권, 2리터) as
    # one more term. Grammatical bound nouns (UNIT_STOP_NNB) stay out.
    "nouns+predicates+units": _UNITS_TAGS,
    # The units profile plus compound nouns: two nouns written together with no space between them
    # (건강보험 -> 건강, 보험 and 건강보험) also give the joined word as one more term, so a query
    # that writes the compound ranks the passages that write it too above those that only use
    # both nouns somewhere. Spaced nouns (건강 보험) are not joined.
    "nouns+predicates+units+compounds": _UNITS_TAGS,
}
COMPOUND_PROFILES = ("nouns+predicates+units+compounds",)
COMPOUND_TAGS = ("NNG", "NNP")  # the nouns a compound joins (pairs of adjacent ones)
DEFAULT_PROFILE = "nouns+predicates+units"
# Bound nouns that are grammar, not content (것, 수, 등, 때문 …): written from Korean grammar, not
# fitted to any set. Every other NNB Kiwi emits is a unit, a counter or a measure word.
UNIT_STOP_NNB = frozenset(
    "것 거 수 등 데 바 줄 지 뿐 만 적 듯 채 척 체 터 김 양 따위 대로 리 나름 즈음 무렵 겸 통 탓 셈 법 뻔 차 중 간 "
    "내 외 측 편 때문 뒤 앞 쪽 녘 나위 노릇 턱 폭 참 이 자 놈 님 씨 군".split())
# Profiles whose labels predate profile fingerprints: their definitions are frozen (a unit test pins
# them), so collections built with them keep their labels. Any other profile's label carries a
# fingerprint of its definition, so changing the definition changes the label and old collections
# are refused until reindexed.
LEGACY_PROFILES = ("nouns", "nouns+predicates", "content")


@dataclass(frozen=True)
class AnalyzerInfo:
    """What the analyzer is, recorded with every collection (a mismatch is refused)."""

    name: str
    version: str
    profile: str

    def label(self) -> str:
        """``kiwipiepy-0.24.1/nouns+predicates``; newer profiles add a fingerprint (``…/nouns+predicates+units#…``)."""
        base = f"{self.name}-{self.version}/{self.profile}"
        return base if self.profile in LEGACY_PROFILES else f"{base}#{profile_fingerprint(self.profile)}"


def profile_fingerprint(profile: str) -> str:
    """8 hex digits of sha256 over what a profile keeps (tags; for NNB also the stop list and joining)."""
    tags = TERM_PROFILES[profile]
    definition = ",".join(tags)
    if "NNB" in tags and profile not in LEGACY_PROFILES:
        definition += "|stop:" + ",".join(sorted(UNIT_STOP_NNB)) + "|join:SN+NNB,NR+NNB"
    if profile in COMPOUND_PROFILES:
        definition += "|compounds:" + "+".join(COMPOUND_TAGS) + ",adjacent pairs"
    return hashlib.sha256(definition.encode()).hexdigest()[:8]


def normalise(text: str) -> str:
    """NFKC (full-width forms, compatibility jamo) and lower-cased Latin."""
    return unicodedata.normalize("NFKC", text).lower()


BACKENDS = {"kiwi": "kiwipiepy", "mecab": "python-mecab-ko"}
PIECE_CHARS = 1000  # a piece analysed at once; short texts (queries, most documents) are one piece
_SENTENCE_END = re.compile(r"[.!?。！？][\s\n]+|\n+")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` in consecutive pieces of at most ``size`` characters; joined, they are ``text``.

    A piece ends after the last sentence end in its second half, else at its last white space, else hard.
    """
    out, start = [], 0
    while len(text) - start > size:
        window = text[start:start + size]
        cut = 0
        for m in _SENTENCE_END.finditer(window, size // 2):
            cut = m.end()
        if not cut:
            space = max(window.rfind(" "), window.rfind("\n"))
            cut = space + 1 if space > 0 else size
        out.append(window[:cut])
        start += cut
    out.append(text[start:])
    return out


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
        # Legacy "content" keeps every NNB; the units profile filters them and joins numbers to them.
        self._units = "NNB" in self._keep and profile not in LEGACY_PROFILES
        self._compounds = profile in COMPOUND_PROFILES
        self._lock = threading.Lock()
        if backend == "kiwi":
            from kiwipiepy import Kiwi

            self._kiwi = Kiwi()
        else:
            import mecab

            self._mecab = mecab.MeCab()
        self.info = AnalyzerInfo(BACKENDS[backend], importlib.metadata.version(BACKENDS[backend]), profile)

    def _morphemes(self, text: str) -> list[tuple[str, str, int, int]]:
        """(form, tag, start, end) of each morpheme in the text.

        MeCab's fused inflections are split back into their morphemes (positions -1: they join no compound).
        """
        with self._lock:
            if self.backend == "kiwi":
                return [(t.form, t.tag, t.start, t.start + t.len) for t in self._kiwi.tokenize(text)]
            out = []
            for m in self._mecab.parse(text):
                expr = m.feature.expression
                if expr and "+" in m.feature.pos:
                    out += [(part.split("/")[0], part.split("/")[1], -1, -1) for part in expr.split("+")]
                else:
                    out.append((m.surface, m.feature.pos, m.span[0], m.span[1]))
            return out

    def terms(self, text: str) -> list[str]:
        """Index terms of a text, in order (repeats kept, for term frequency).

        A long text is analysed in pieces of at most :data:`PIECE_CHARS` characters cut at sentence
        ends (else at white space), so the cost stays linear in its length: the analyser's own cost
        grows faster than linearly on one long input (19,000 characters: ~2 s whole).
        """
        out: list[str] = []
        for piece in pieces(normalise(text)):
            out += self._piece_terms(piece)
        return out

    def _piece_terms(self, text: str) -> list[str]:
        # Predicates are indexed by stem (먹었다, 먹는 -> 먹); tags like VV-R share the prefix.
        morphemes = self._morphemes(text)
        if not self._units:
            return [form for form, tag, _, _ in morphemes if tag.startswith(self._keep)]
        out: list[str] = []
        prev = ("", "", -1, -1)
        for form, tag, start, end in morphemes:
            if tag == "NNB":
                if form in UNIT_STOP_NNB:
                    prev = (form, tag, start, end)
                    continue
                out.append(form)
                if prev[1] in ("SN", "NR"):
                    out.append(prev[0] + form)  # 3권, 2리터, 만원: the quantity as asked for
            elif tag.startswith(self._keep):
                out.append(form)
                if (self._compounds and tag in COMPOUND_TAGS and prev[1] in COMPOUND_TAGS
                        and start >= 0 and prev[3] == start):
                    out.append(prev[0] + form)  # 건강+보험 written as one word: 건강보험
            prev = (form, tag, start, end)
        return out

    def terms_batch(self, texts: list[str]) -> list[list[str]]:
        """Index terms of many texts."""
        return [self.terms(t) for t in texts]

    def term_counts(self, text: str) -> Counter[str]:
        """Term frequencies of a text."""
        return Counter(self.terms(text))
