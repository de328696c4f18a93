"""The retrieval writer keeps one copy of a catalog's metadata; its fields change under a lock (issue 77, item 2).

Before: the writer re-read its own metadata from the store every ``--meta-ttl-s`` (a re-read meant for
readers), so concurrent upserts held different copies of it: each added its batch to the count it had
read and stored it, and BM25's document count and mean length lost all but one of the concurrent
batches. Here 12 upserts run at once on the writer with a 10 ms TTL (every call after the first is a
re-read), next to a reader replica on the same store: the count must be every document written.

Over a real embedding service and Qdrant's embedded store, the two replicas in this process (as in
tests/service/test_retrieval_replicas.py).
"""

from __future__ import annotations

import asyncio

import pytest
from mesh.retrieval.v1 import retrieval_pb2 as pb

from support.servers import retrieval_stub

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_concurrent_upserts_on_the_writer_lose_no_count(embedding_service, tmp_path):
    async with retrieval_stub(tmp_path / "q", embedding_service.port, meta_ttl_s=0.01) as (writer, stub), \
            retrieval_stub(tmp_path / "q", embedding_service.port, store=writer.retriever.store, role="reader",
                           meta_ttl_s=0.01) as (_reader, reader_stub):
        await stub.CreateCollection(pb.CreateCollectionRequest(name="count"), timeout=30)

        async def batch(b: int) -> None:
            docs = [pb.Document(id=f"d{b}-{i}", text=f"{b}번 묶음의 {i}번째 도서: 비 오는 날 읽기 좋은 소설")
                    for i in range(3)]
            await stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="count", documents=docs), timeout=60)

        await asyncio.gather(*(batch(b) for b in range(12)))
        stored = await writer.retriever.state.run_db(writer.retriever.store.get_meta, "count")
        assert int(stored.extra["docs_written"]) == 36, stored.extra  # every batch counted, in the store
        assert (await writer.retriever.state.meta("count")) is (await writer.retriever.state.meta("count"))
        found = await reader_stub.Search(pb.SearchRequest(collection="count", query="비 오는 날 소설", top_k=5),
                                         timeout=30)
        assert found.hits  # the reader, following the store, searches what the writer wrote
