"""Documents made ready to store in a catalog's layout: cut into passages, embedded and analysed.

Writes, a reindex and the replay of writes made during one all go through :func:`prepare`, so a
document becomes the same points whichever path stored it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.bootstrap.errors import DependencyUnavailable
from services.retrieval.korean.bm25 import Bm25
from services.retrieval.passages import Layout, Span, split
from services.retrieval.state import REINDEX_EMBED_TEXTS, CatalogState, left
from services.retrieval.store import StoredPoint

EMBED_TEXTS = REINDEX_EMBED_TEXTS  # passages per Embed call (16: <= 8k tokens, a few seconds here)


@dataclass
class Prepared:
    """A document ready to store: its passages' places, vectors and terms, in one layout."""

    doc_id: str
    text: str
    payload: dict[str, Any]
    layout: str
    spans: list[Span]
    vectors: list[list[float]]
    terms: list[list[str]]
    revision: str = ""  # the model revision of ``vectors``

    def points(self, bm25: Bm25) -> list[StoredPoint]:
        """The document's points, keyword weights from ``bm25`` (the collection's average length)."""
        n = len(self.spans)
        out = []
        for span, vec, toks in zip(self.spans, self.vectors, self.terms, strict=True):
            sparse = bm25.document(toks)
            out.append(StoredPoint(self.doc_id, self.text[span.start:span.end], self.payload, vec, sparse.indices,
                                   sparse.values, span.ordinal, span.start, span.end, n,
                                   self.text if span.ordinal == 0 and n > 1 else None))
        return out


def spans_of(text: str, layout: Layout) -> list[Span]:
    """The passages a document has in ``layout`` (one, the whole text, in the document layout)."""
    return split(text, layout.chars, layout.overlap) if layout.passages else [Span(0, 0, len(text))]


async def embed_passages(state: CatalogState, texts: list[str], until: float | None,
                         per_call_s: float, revision: str = "") -> tuple[np.ndarray, str]:
    """Passage vectors in calls of at most ``EMBED_TEXTS`` texts, each with its own deadline.

    One call per batch gave 64 long passages (512 tokens each, ~40 s on two cores) one 20 s deadline:
    the batch could never be written, and every retry embedded it again. A call of 16 is bounded work.
    """
    parts, wanted, revision = [], revision, ""
    for i in range(0, len(texts), EMBED_TEXTS):
        vecs, got = await state.embed(texts[i:i + EMBED_TEXTS], "passage", left(until, per_call_s), wanted)
        if revision and got != revision:
            raise DependencyUnavailable(f"the embedding service changed revision ({revision} -> {got}) "
                                        "within one batch; nothing was written: retry it")
        revision = got
        parts.append(vecs)
    if not parts:
        return np.zeros((0, state.dim), dtype=np.float32), revision
    return np.concatenate(parts) if len(parts) > 1 else parts[0], revision


async def prepare(state: CatalogState, docs: list[tuple[str, str, dict[str, Any]]], layout: Layout,
                  until: float | None = None, per_call_s: float | None = None,
                  terms: list[list[str]] | None = None, revision: str = "") -> tuple[list[Prepared], str, int, int]:
    """``docs`` (id, text, payload) cut, embedded and analysed: (prepared, revision, embed ns, analysis ns).

    ``revision`` is the model revision the vectors are for (a collection's): the instance serving it
    embeds them when several are configured.

    ``terms``, when the caller analysed the passages already (a reindex does, for BM25's average
    length), are used instead of analysing them again: one list per passage, in order.
    """
    spans = [spans_of(text, layout) for _, text, _ in docs]
    texts = [text[s.start:s.end] for (_, text, _), sp in zip(docs, spans, strict=True) for s in sp]
    t0 = time.perf_counter()
    vectors, revision = await embed_passages(state, texts, until, per_call_s or state.embed_timeout_s * 10, revision)
    t1 = time.perf_counter()
    if terms is None or len(terms) != len(texts):
        terms = await state.bulk_terms(texts, until)
    t2 = time.perf_counter()
    out, k = [], 0
    label = layout.label()
    for (doc_id, text, payload), sp in zip(docs, spans, strict=True):
        n = len(sp)
        out.append(Prepared(doc_id, text, payload, label, sp, [v.tolist() for v in vectors[k:k + n]],
                            terms[k:k + n], revision))
        k += n
    return out, revision, int((t1 - t0) * 1e9), int((t2 - t1) * 1e9)
