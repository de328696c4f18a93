"""The real embedding server (int8 model) on port 0, driven through the project's clients."""

import asyncio
from pathlib import Path

import grpc
import numpy as np
import pytest
from mesh.embedding.v1 import embedding_pb2 as pb
from mesh.embedding.v1 import embedding_pb2_grpc as pb_grpc

from clients import AsyncEmbeddingClient, EmbeddingClient, InvalidArgument
from services.embedding.engine.onnx import OnnxRuntimeEngine
from services.embedding.engine.tokenizer import E5Tokenizer, TokenBatch
from support import module_process, off_loop
from support.embedding import KOREAN_QUERIES

pytestmark = pytest.mark.asyncio(loop_scope="session")


def cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_query_vectors_are_normalised_and_match_in_process_engine(embedding_service, model_dir):
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        result = await client.embed(KOREAN_QUERIES, "query")
    assert result.vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
    def in_process():  # the reference engine, loaded and run off the loop the service shares with this test
        tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
        return OnnxRuntimeEngine(model_dir, "int8", 1).encode_core(TokenBatch.pad(tok.encode(KOREAN_QUERIES, True)))

    direct = await asyncio.to_thread(in_process)
    for got, want in zip(result.vectors, direct, strict=True):
        assert cos(got, want) > 0.9999
    assert all(c > 2 for c in result.token_counts) and not any(result.truncated)
    t = result.timings
    assert t.inference_ns > 0 and t.total_ns >= t.inference_ns and t.batch_size >= 1


async def test_kind_changes_the_vector_and_meaning_is_kept(embedding_service):
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        q = (await client.embed(["아이에게 읽어 줄 동화책"], "query")).vectors[0]
        p = (await client.embed(["아이에게 읽어 줄 동화책"], "passage")).vectors[0]
        docs = (await client.embed(["어린이를 위한 그림 동화 모음집", "노트북 거치대 알루미늄 받침대"],
                                   "passage")).vectors
    assert cos(q, p) < 0.999
    assert cos(q, docs[0]) > cos(q, docs[1]) + 0.05


async def test_long_text_truncated_by_default_and_rejected_when_strict(embedding_service):
    long = "검색 품질을 높이기 위한 긴 문서입니다. " * 150
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        result = await client.embed([long, "짧은 문서"], "passage")
        assert result.truncated == [True, False] and result.token_counts[0] == 512
        with pytest.raises(InvalidArgument) as info:
            await client.embed(["짧은 문서", long], "passage", strict=True)
    assert [v.field for v in info.value.violations] == ["texts[1]"]


@pytest.mark.parametrize("request_kw, field", [
    (dict(texts=[], kind=pb.EMBED_KIND_QUERY), "texts"),
    (dict(texts=["", "  "], kind=pb.EMBED_KIND_QUERY), "texts[0]"),
    (dict(texts=["책"] * 65, kind=pb.EMBED_KIND_QUERY), "texts"),
    (dict(texts=["책"], kind=pb.EMBED_KIND_UNSPECIFIED), "kind"),
    (dict(texts=["책"], kind=7), "kind"),
    (dict(texts=["가" * 20001], kind=pb.EMBED_KIND_PASSAGE), "texts[0]"),
])
async def test_bad_input_is_invalid_argument_with_field_and_service_keeps_serving(
        embedding_service, request_kw, field):
    target = f"127.0.0.1:{embedding_service.port}"
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.EmbeddingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Embed(pb.EmbedRequest(**request_kw), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    from clients.errors import from_rpc_error

    err = from_rpc_error(info.value)
    assert field in [v.field for v in err.violations]
    async with AsyncEmbeddingClient(target) as client:
        assert (await client.embed(["그래도 잘 동작한다"])).vectors.shape == (1, 384)


async def test_invalid_utf8_is_invalid_argument(embedding_service):
    # texts[0] = b"\xff\xfe" (not UTF-8), kind = QUERY; sent as raw bytes, as a non-Python client could.
    raw = b"\x0a\x02\xff\xfe\x10\x01"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{embedding_service.port}") as channel:
        call = channel.unary_unary("/mesh.embedding.v1.EmbeddingService/Embed",
                                   request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(raw, timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "UTF-8" in info.value.details() or "valid" in info.value.details()


async def test_stream_answers_in_order_isolates_bad_batch_and_ends_with_summary(embedding_service):
    batches = [["첫 번째 문서", "두 번째 문서"], ["  "], ["세 번째 문서"] * 3]
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        events = [e async for e in client.embed_stream(batches)]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["result", "result", "result", "summary"]
    r0, r1, r2 = (e.result for e in events[:3])
    assert [r.sequence for r in (r0, r1, r2)] == [0, 1, 2]
    assert len(r0.response.embeddings) == 2 and len(r2.response.embeddings) == 3
    assert r1.HasField("error") and r1.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert r1.error.field_violations[0].field == "texts[0]"
    s = events[-1].summary
    assert (s.batches, s.failed_batches, s.texts) == (3, 1, 5)


async def test_concurrent_callers_are_batched(embedding_service):
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        results = await asyncio.gather(*(client.embed([f"동시 요청 {i}번"]) for i in range(24)))
    assert max(r.timings.batch_size for r in results) > 1


async def test_info_describes_the_model(embedding_service):
    with EmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        info = await asyncio.to_thread(client.info)
    assert (info.model_id, info.dim, info.max_tokens) == ("intfloat/multilingual-e5-small", 384, 512)
    assert info.engine == "onnxruntime" and info.precision == "int8"
    assert info.revision.startswith("me5s-")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_memory_returns_near_the_warm_baseline_after_a_max_size_request(model_dir):
    # Issue 17, defect 7: 64 texts of ~2,400 characters (512 tokens each) took the process from
    # ~0.55 to ~3.4 GB RSS, never released. A real server process, so RSS is the service's alone.
    async with off_loop(module_process("services.embedding", "--port", "0", "--log-level", "WARNING",
                                           "--model-dir", str(model_dir))) as server:
        async with AsyncEmbeddingClient(server.target, timeout_s=120) as client:
            for query in KOREAN_QUERIES * 5:
                await client.embed([query], "query")
            await client.embed(["한국어 상품 설명 문장입니다. " * 8] * 32, "passage")  # a usual ingest batch
            baseline = _rss_mib(server.proc.pid)
            sentence = "검색 품질을 높이기 위한 긴 문서입니다. 한국어 문장을 이어 붙인 본문이라 토큰이 많습니다. "
            texts = [f"{i}번 " + (sentence * 60)[:2400] for i in range(64)]
            result = await client.embed(texts, "passage")
            assert min(result.token_counts) == 512
            after = _rss_mib(server.proc.pid)
            assert (await client.embed(["그래도 잘 동작한다"])).vectors.shape == (1, 384)
    assert after <= 1.5 * baseline, f"RSS {baseline:.0f} MiB warm, {after:.0f} MiB after the request"
