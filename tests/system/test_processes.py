"""Whole processes: the service started as operators start it, and behind a real tritonserver."""

import os
import signal
import subprocess

import numpy as np
import pytest

from clients import EmbeddingClient
from services.runtime.processes import start_process
from support import free_port
from support.embedding import KOREAN_QUERIES

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_service(*args: str, module: str = "services.embedding") -> tuple[subprocess.Popen, int]:
    return start_process(module, "--port", "0", *args, timeout_s=90)


def test_service_process_serves_and_stops_gracefully_on_sigterm():
    proc, port = start_service("--intra-op-threads", "1")
    try:
        with EmbeddingClient(f"127.0.0.1:{port}") as client:
            assert client.embed(["프로세스로 띄운 서비스"]).vectors.shape == (1, 384)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_retrieval_process_searches_through_the_embedding_process_and_stops_on_sigterm(tmp_path):
    import grpc
    from mesh.retrieval.v1 import retrieval_pb2 as pb
    from mesh.retrieval.v1 import retrieval_pb2_grpc as pbg

    emb, emb_port = start_service("--intra-op-threads", "1")
    ret, port = start_service("--qdrant-location", str(tmp_path / "q"), "--embedding-target", f"127.0.0.1:{emb_port}",
                              module="services.retrieval")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pbg.RetrievalServiceStub(channel)
            stub.CreateCollection(pb.CreateCollectionRequest(name="shop"), timeout=30)
            stub.UpsertDocuments(pb.UpsertDocumentsRequest(collection="shop", documents=[
                pb.Document(id="1", text="무선 노이즈 캔슬링 이어폰"), pb.Document(id="2", text="원목 캠핑 테이블")]),
                timeout=30)
            resp = stub.Search(pb.SearchRequest(collection="shop", query="캠핑 갈 때 쓸 탁자"), timeout=10)
            assert resp.hits[0].id == "2" and resp.mode == pb.SEARCH_MODE_HYBRID and not resp.degraded
        for p in (ret, emb):
            p.send_signal(signal.SIGTERM)
            assert p.wait(20) == 0
    finally:
        for p in (ret, emb):
            if p.poll() is None:
                p.kill()


def test_triton_engine_matches_in_process_engine(model_dir):
    from infra.triton.launcher import start_triton

    grpc_port = free_port()
    triton = start_triton(model_dir, "int8", grpc_port=grpc_port, http_port=free_port(), metrics_port=free_port(),
                          intra_op_threads=1)
    try:
        triton.wait_ready(120)
        proc, port = start_service("--engine", "triton", "--triton-url", triton.grpc_url, "--intra-op-threads", "1")
        local, local_port = start_service("--intra-op-threads", "1")
        try:
            with EmbeddingClient(f"127.0.0.1:{port}") as via_triton, \
                    EmbeddingClient(f"127.0.0.1:{local_port}") as in_process:
                assert via_triton.info().engine == "triton"
                a = via_triton.embed(KOREAN_QUERIES).vectors
                b = in_process.embed(KOREAN_QUERIES).vectors
            np.testing.assert_allclose(np.sum(a * b, axis=1), 1.0, atol=1e-4)
        finally:
            for p in (proc, local):
                p.send_signal(signal.SIGTERM)
                p.wait(20)
    finally:
        triton.stop()


def test_triton_configs_parse_offline():
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    for path in ("infra/triton/model_repository/e5_small/config.pbtxt", "infra/triton/gpu/e5_small/config.pbtxt"):
        with open(os.path.join(ROOT, path)) as fh:
            config = text_format.Parse(fh.read(), model_config_pb2.ModelConfig())
        assert config.name == "e5_small"
        assert [i.name for i in config.input] == ["input_ids", "attention_mask"]
        assert config.output[0].name == "sentence_embedding" and list(config.output[0].dims) == [384]
