"""BM25 as a sparse vector.

Term-frequency saturation and length normalisation are applied on the document side; Qdrant's IDF
modifier supplies the inverse document frequency at query time. Terms are hashed to 32-bit indices
(crc32); a rare collision merges two terms, as in any hashing vectoriser.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass


def term_index(term: str) -> int:
    """Stable 32-bit index of a term (crc32; the same in every process and release)."""
    return zlib.crc32(term.encode("utf-8"))


@dataclass(frozen=True)
class SparseVector:
    """Indices and values of a sparse vector, indices unique."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class Bm25:
    """Document weight ``tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))`` per term."""

    k1: float = 1.2
    b: float = 0.75
    avg_doc_len: float = 64.0

    def document(self, terms: list[str]) -> SparseVector:
        """Sparse BM25 weights of a document's terms."""
        counts = Counter(terms)
        dl = max(1, len(terms))
        norm = self.k1 * (1 - self.b + self.b * dl / self.avg_doc_len)
        return _merge({term_index(t): tf * (self.k1 + 1) / (tf + norm) for t, tf in counts.items()})

    @staticmethod
    def query(terms: list[str]) -> SparseVector:
        """Query side: each distinct term once (Qdrant multiplies in the IDF)."""
        return _merge({term_index(t): 1.0 for t in set(terms)})


def _merge(weights: dict[int, float]) -> SparseVector:
    items = sorted(weights.items())
    return SparseVector([i for i, _ in items], [v for _, v in items])
