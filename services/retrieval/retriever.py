"""The retrieval service's logic, free of gRPC: one object composing its parts over one shared state.

``admin`` (catalogs), ``documents`` (writes), ``searches`` and ``reindexer`` each own one
responsibility (their modules beside this one); :class:`~services.retrieval.state.CatalogState`
holds what they share (store, analyser, embedder, threads, metadata, write gates).
"""

from __future__ import annotations

from services.retrieval.catalogs import CatalogAdmin
from services.retrieval.documents import DocumentWrites
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.passages import Layout
from services.retrieval.reindex import Reindexer
from services.retrieval.search import CatalogSearch
from services.retrieval.state import CatalogState, Embedder
from services.retrieval.store import CatalogStore


class Retriever:
    """Catalog operations over a :class:`CatalogStore`, a Korean analyzer and an embedder."""

    def __init__(self, store: CatalogStore, analyzer: KoreanAnalyzer, embedder: Embedder, *, dim: int = 384,
                 k1: float = 1.2, b: float = 0.75, embed_timeout_s: float = 2.0, default_fusion: str = "auto",
                 default_rrf_k: int = 60, default_dense_weight: float = 0.5, layout: Layout | None = None,
                 others: list[Embedder] | None = None, grace_s: float = 3600.0, meta_ttl_s: float = 1.0,
                 reader: bool = False) -> None:
        self.state = CatalogState(store, analyzer, embedder, dim=dim, k1=k1, b=b, embed_timeout_s=embed_timeout_s,
                                  default_fusion=default_fusion, default_rrf_k=default_rrf_k,
                                  default_dense_weight=default_dense_weight, layout=layout, others=others,
                                  grace_s=grace_s, meta_ttl_s=meta_ttl_s, reader=reader)
        # A reader refuses every write (RetrievalServicer): the write gate, the record of writes during a
        # reindex and the drop of replaced versions live in the one writer's process.
        self.reader = reader
        self.store = store
        self.admin = CatalogAdmin(self.state)
        self.documents = DocumentWrites(self.state)
        self.searches = CatalogSearch(self.state)
        self.reindexer = Reindexer(self.state)

    async def close(self) -> None:
        """Stop the worker threads."""
        await self.state.close()
