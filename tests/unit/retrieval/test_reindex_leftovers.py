"""Collections left by an interrupted reindex or create are found and removed (issue 17 defect 10).

A crash is simulated through the store interface itself: a versioned collection created and never
swapped in, exactly what a reindex killed mid-copy leaves. Both embedded engines, on disk.
"""

import asyncio
import logging

import pytest

from services.bootstrap.errors import NotFound
from services.retrieval.korean.analyzer import KoreanAnalyzer
from services.retrieval.retriever import Retriever
from services.retrieval.store import StoredPoint, open_store
from services.retrieval.store.client import ClientCatalogStore, open_client

FIELDS = {"category": "keyword"}


def point(doc_id: str) -> StoredPoint:
    return StoredPoint(doc_id, f"문서 {doc_id}", {"category": "책"}, [1.0, 0.0, 0.0, 0.0], [1], [1.0])


class UnusedEmbedder:
    """Implements the Embedder interface; leftovers are removed without embedding, so any call fails the test."""

    async def embed(self, texts, kind, timeout_s):  # noqa: D102
        raise AssertionError("removing leftovers must not embed")

    async def probe(self) -> None:  # noqa: D102
        return None

    async def close(self) -> None:  # noqa: D102
        return None


@pytest.fixture(scope="module")
def analyzer():
    return KoreanAnalyzer()


def crashed_reindex(path: str, engine: str) -> tuple[str, str, str]:
    """A catalog with data, a half-built version of it and a never-finished catalog; store closed ("crash")."""
    store = open_store(path, engine)
    meta = store.create_catalog("books", FIELDS, "rev", "an", 4, 4.0)
    store.upsert(meta.collection, [point("a"), point("b")])
    half_built = store.create_version("books", FIELDS, 4)
    store.upsert(half_built, [point("a")])
    never_swapped = store.create_version("ghost", FIELDS, 4)  # create killed before its alias and metadata
    store.close()
    return meta.collection, half_built, never_swapped


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_start_removes_every_leftover_and_names_them(engine, tmp_path, analyzer, caplog):
    live, half_built, never_swapped = crashed_reindex(str(tmp_path / "q"), engine)
    store = open_store(str(tmp_path / "q"), engine)
    assert set(store.list_collections()) == {live, half_built, never_swapped}
    retriever = Retriever(store, analyzer, UnusedEmbedder(), dim=4)
    try:
        with caplog.at_level(logging.WARNING, logger="services.retrieval.reindex"):
            gone = asyncio.run(retriever.reindexer.drop_leftovers())
        assert gone == sorted([half_built, never_swapped])
        lines = [r.getMessage() for r in caplog.records if "left by an interrupted reindex" in r.getMessage()]
        assert len(lines) == 1 and half_built in lines[0] and never_swapped in lines[0]
        assert store.list_collections() == [live] and store.count(live) == 2
        assert asyncio.run(retriever.reindexer.drop_leftovers()) == []
    finally:
        asyncio.run(retriever.close())
        store.close()


def test_a_shared_server_is_cleaned_per_catalog_at_its_next_reindex_only(tmp_path, analyzer):
    """On a server other workers may be building: start-up leaves it alone; a reindex of ``books`` cleans books."""
    live, half_built, never_swapped = crashed_reindex(str(tmp_path / "q"), "client")
    store = ClientCatalogStore(open_client(str(tmp_path / "q")), exclusive=False)
    retriever = Retriever(store, analyzer, UnusedEmbedder(), dim=4)
    try:
        assert asyncio.run(retriever.reindexer.drop_leftovers()) == []
        assert asyncio.run(retriever.reindexer.drop_leftovers("books")) == [half_built]
        assert set(store.list_collections()) == {live, never_swapped}
    finally:
        asyncio.run(retriever.close())
        store.close()


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_delete_catalog_removes_alias_metadata_and_data(engine, tmp_path):
    store = open_store(str(tmp_path / "q"), engine)
    try:
        kept = store.create_catalog("kept", FIELDS, "rev", "an", 4, 4.0)
        meta = store.create_catalog("books", FIELDS, "rev", "an", 4, 4.0)
        store.upsert(meta.collection, [point("a"), point("b")])
        assert sorted(m.name for m in store.list_meta()) == ["books", "kept"]
        assert store.delete_catalog("books") == (meta.collection, 2)
        assert [m.name for m in store.list_meta()] == ["kept"] and store.alias_target("books") is None
        assert store.list_collections() == [kept.collection]
        with pytest.raises(NotFound):
            store.delete_catalog("books")
    finally:
        store.close()
