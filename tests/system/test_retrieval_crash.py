"""A retrieval process killed mid-reindex (kill -9), restarted on the same folder (issue 17 defect 10).

The half-built collection is removed at start with one log line naming it; the catalog keeps every
document and a new reindex succeeds.
"""

import json
import signal

import grpc
import pytest
from mesh.retrieval.v1 import retrieval_pb2 as pb
from mesh.retrieval.v1 import retrieval_pb2_grpc as pbg

from services.retrieval.store import open_store
from services.runtime.processes import start_process

pytestmark = pytest.mark.slow
TEXTS = ["무선 노이즈 캔슬링 이어폰", "원목 캠핑 테이블", "겨울용 거위털 패딩", "스테인리스 텀블러",
         "아이용 그림 동화책", "파이썬 데이터 분석 입문서", "제주도 여행 가이드북", "가정용 커피 그라인더"]


def start(module: str, *args: str, lines: list[str] | None = None):
    return start_process(module, "--port", "0", *args, timeout_s=90, echo=None if lines is None else lines.append)


def test_leftover_of_a_killed_reindex_is_removed_at_restart(tmp_path):
    folder = str(tmp_path / "q")
    emb, emb_port = start("services.embedding", "--intra-op-threads", "1")
    procs = [emb]
    try:
        ret, port = start("services.retrieval", "--qdrant-location", folder, "--embedding-target",
                          f"127.0.0.1:{emb_port}")
        procs.append(ret)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pbg.RetrievalServiceStub(channel)
            stub.CreateCollection(pb.CreateCollectionRequest(name="shop"), timeout=30)
            docs = [pb.Document(id=f"d{i}", text=f"{TEXTS[i % len(TEXTS)]} {i}호") for i in range(40)]
            stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="shop", documents=docs), timeout=60)
            live = stub.GetCollection(pb.GetCollectionRequest(name="shop"), timeout=10).collection.collection
            for event in stub.Reindex(pb.ReindexRequest(collection="shop", batch_size=1), timeout=120):
                if event.progress.done >= 2:  # the new collection exists and holds documents
                    ret.send_signal(signal.SIGKILL)
                    break
        ret.wait(20)
        store = open_store(folder)
        try:
            leftovers = [c for c in store.list_collections() if c != live]
        finally:
            store.close()
        assert len(leftovers) == 1  # what the crash left: reindexes used to leave it for good

        lines: list[str] = []
        ret, port = start("services.retrieval", "--qdrant-location", folder, "--embedding-target",
                          f"127.0.0.1:{emb_port}", lines=lines)
        procs.append(ret)
        notes = [json.loads(line)["message"] for line in lines if line.startswith("{")]
        named = [m for m in notes if "left by an interrupted reindex" in m]
        assert len(named) == 1 and leftovers[0] in named[0], notes
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pbg.RetrievalServiceStub(channel)
            info = stub.GetCollection(pb.GetCollectionRequest(name="shop"), timeout=10).collection
            assert (info.collection, info.documents) == (live, 40)
            summary = list(stub.Reindex(pb.ReindexRequest(collection="shop"), timeout=120))[-1].summary
            assert summary.previous_collection == live and summary.documents == 40
        ret.send_signal(signal.SIGTERM)
        assert ret.wait(20) == 0
        store = open_store(folder)
        try:
            assert store.list_collections() == [summary.collection]
        finally:
            store.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
