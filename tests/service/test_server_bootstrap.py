"""Bootstrap behaviour on a real server: health transitions, reflection, tracing, metrics, overload."""

import asyncio
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from clients import AsyncEmbeddingClient, Overloaded, Unavailable
from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.onnx import OnnxRuntimeEngine
from services.embedding.errors import EngineUnavailable
from services.embedding.server import create_embedding_service
from services.runtime.loopguard import starting
from support.embedding import embedding_settings
from support.servers import running_embedding

pytestmark = pytest.mark.asyncio(loop_scope="session")
SERVICE = "mesh.embedding.v1.EmbeddingService"


class SlowEngine(EmbeddingEngine):
    """Fault injection: the real engine behind a delay (and an off switch)."""

    name = "onnxruntime"

    def __init__(self, inner: EmbeddingEngine, delay_s: float) -> None:
        self.inner, self.delay_s, self.down = inner, delay_s, False
        self.precision = inner.precision

    def encode_core(self, batch):
        time.sleep(self.delay_s)
        if self.down:
            raise EngineUnavailable("engine is down (injected)")
        return self.inner.encode_core(batch)


async def health_status(port: int, service: str = "") -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)).status


async def test_health_is_not_serving_until_warm_then_serving_then_not_serving_on_stop(model_dir):
    with starting():  # by hand, not running(): the state between start and warm-up is what is checked
        svc = await create_embedding_service(embedding_settings(model_dir), registry=CollectorRegistry())
        await svc.mesh.start()
    try:
        assert await health_status(svc.port) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert await health_status(svc.port, SERVICE) == health_pb2.HealthCheckResponse.NOT_SERVING
        await svc.warm_up()
        assert await health_status(svc.port) == health_pb2.HealthCheckResponse.SERVING
        assert await health_status(svc.port, SERVICE) == health_pb2.HealthCheckResponse.SERVING
        await svc.mesh.set_serving(False)
        assert await health_status(svc.port) == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        await svc.close()


async def test_reflection_lists_the_service(embedding_service):
    async with grpc.aio.insecure_channel(f"127.0.0.1:{embedding_service.port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = [s.name async for r in responses for s in r.list_services_response.service]
    assert SERVICE in names and "grpc.health.v1.Health" in names


async def test_no_reflection_hides_the_schema_and_keeps_serving(model_dir):
    async with running_embedding(model_dir, reflection=False) as svc:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{svc.port}") as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            for _ in range(3):
                responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    [r async for r in responses]
                # The server may refuse the stream before the client has sent its request; the client's send
                # then fails with INTERNAL ("Failed execute_batch") instead of the status: a race, asked again.
                if err.value.code() != grpc.StatusCode.INTERNAL:
                    break
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        async with AsyncEmbeddingClient(f"127.0.0.1:{svc.port}") as client:
            assert len((await client.embed(["반사 없이도 답합니다"])).vectors) == 1


async def test_spans_are_recorded_for_rpcs_but_not_health_checks(model_dir):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with running_embedding(model_dir, tracer_provider=provider) as svc:
        async with AsyncEmbeddingClient(f"127.0.0.1:{svc.port}") as client:
            await client.embed(["추적되는 요청"])
        await health_status(svc.port)
    names = [s.name for s in exporter.get_finished_spans()]
    assert f"/{SERVICE}/Embed" in names
    assert not any("Health" in n for n in names)


async def test_metrics_endpoint_exposes_rpc_and_batch_metrics(embedding_service):
    async with AsyncEmbeddingClient(f"127.0.0.1:{embedding_service.port}") as client:
        await client.embed(["지표 확인용 요청"])
    port = embedding_service.mesh.metrics_port
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read())
    text = body.decode()
    assert 'mesh_grpc_server_handled_total{code="OK",method="/mesh.embedding.v1.EmbeddingService/Embed"}' in text
    assert "mesh_embedding_batch_size_bucket" in text and "mesh_embedding_queue_wait_seconds" in text


async def test_full_queue_is_resource_exhausted_with_retry_info_and_engine_down_is_unavailable(model_dir):
    engine = SlowEngine(OnnxRuntimeEngine(model_dir, "int8", 1), delay_s=0.3)
    async with running_embedding(model_dir, engine=engine, max_batch_size=2, max_queue_texts=4) as svc:
        async with AsyncEmbeddingClient(f"127.0.0.1:{svc.port}", timeout_s=10) as client:
            calls = [asyncio.ensure_future(client.embed([f"요청 {i}", f"요청 {i}-2"])) for i in range(6)]
            results = await asyncio.gather(*calls, return_exceptions=True)
            overloaded = [r for r in results if isinstance(r, Overloaded)]
            assert overloaded and all(r.retry_after_s and r.retry_after_s > 0 for r in overloaded)
            assert any(not isinstance(r, Exception) for r in results)
            engine.down = True
            with pytest.raises(Unavailable):
                await client.embed(["엔진이 죽었을 때"])
            engine.down = False
            assert (await client.embed(["다시 살아났다"])).vectors.shape == (1, 384)
