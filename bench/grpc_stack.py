"""What each layer of the project's gRPC server stack costs per call, side by side in one run.

``python -m bench.grpc_stack`` starts, one after another, a server process per variant on loopback
and calls its ``EmbeddingService/Info`` (an empty RPC: a fixed, small response) from this process
with a sync client: a bare grpcio aio server with one generic handler (the floor), the project's
``create_server`` with no telemetry, with the RPC metrics only, with the server spans
only (the process's SDK provider, no exporter, as ``make run`` without a trace UI),
and the full stack. Reports p50/p95 of each and the difference to the bare server; writes
``bench/results/grpc_stack.{md,json}``. Calls are bounded (``--calls``); every server is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import md_table
from bench.report import RESULTS, write_result
from services.runtime.processes import start_process, stop_process

METHOD = "/mesh.embedding.v1.EmbeddingService/Info"
VARIANTS = {
    "bare": "bare grpcio aio server, one generic handler (the floor)",
    "stack-none": "project create_server, no telemetry (safe decoding, error mapping, health, reflection)",
    "stack-metrics": "project create_server, RPC metrics only",
    "stack-tracing": "project create_server, server spans only (SDK provider, no exporter)",
    "stack-full": "project create_server as the services run it (tracing + metrics)",
}


def _info():
    from mesh.embedding.v1 import embedding_pb2 as pb

    return pb.InfoResponse(model_id="intfloat/multilingual-e5-small", revision="bench", dim=384, max_tokens=512)


async def _serve(variant: str) -> None:
    """One server of ``variant`` on a free port; prints ``SERVING port=N`` and runs until SIGTERM."""
    import grpc
    from mesh.embedding.v1 import embedding_pb2 as pb
    from prometheus_client import CollectorRegistry

    info = _info()
    if variant == "bare":
        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return info.SerializeToString()

        server = grpc.aio.server()
        rpc = grpc.unary_unary_rpc_method_handler(handle)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "mesh.embedding.v1.EmbeddingService", {"Info": rpc})])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
    else:
        from services.bootstrap.server import ServiceRegistration, create_server
        from services.runtime.settings import ServiceSettings
        from services.runtime.tracing import make_tracer_provider

        keep = {"stack-none": (), "stack-metrics": ("metrics",), "stack-tracing": ("tracing",),
                "stack-full": ("metrics", "tracing")}[variant]

        class Servicer:
            async def Info(self, request, context):  # noqa: N802 - the RPC's name
                return info

            def __getattr__(self, name):  # the other RPCs are not called here
                async def unused(request, context):
                    raise NotImplementedError(name)
                return unused

        service = ServiceRegistration(pb.DESCRIPTOR.services_by_name["EmbeddingService"], Servicer())
        mesh = await create_server(ServiceSettings(port=0, metrics_port=-1), [service],
                                   tracer_provider=make_tracer_provider("bench-grpc-stack", "none"),
                                   registry=CollectorRegistry(), instrument=keep)
        await mesh.start()
        await mesh.set_serving(True)
        server, port = mesh.server, mesh.port
    print(f"SERVING port={port}", flush=True)
    await server.wait_for_termination()


def _measure(port: int, calls: int, warmup: int) -> list[float]:
    import grpc
    from mesh.embedding.v1 import embedding_pb2 as pb

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD, request_serializer=pb.InfoRequest.SerializeToString,
                                   response_deserializer=pb.InfoResponse.FromString)
        for _ in range(warmup):
            call(pb.InfoRequest(), timeout=5)
        out = []
        for _ in range(calls):
            t = time.perf_counter()
            call(pb.InfoRequest(), timeout=5)
            out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> int:
    """Measure every variant (``--rounds`` interleaved rounds), print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per variant and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; variants interleaved in each")
    parser.add_argument("--serve", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return 0
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    p50s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            proc, port = start_process("bench.grpc_stack", "--serve", variant)
            try:
                lat = _measure(port, args.calls, warmup=200)
            finally:
                stop_process(proc)
            samples[variant] += lat
            p50s[variant].append(float(np.percentile(lat, 50)))
    bare = float(np.median(p50s["bare"]))
    rows, data = [], {}
    for variant, text in VARIANTS.items():
        p50 = float(np.median(p50s[variant]))
        p95 = float(np.percentile(samples[variant], 95))
        data[variant] = {"p50_ms": round(p50, 4), "p95_ms": round(p95, 4), "round_p50s_ms": p50s[variant],
                         "over_bare_p50_ms": round(p50 - bare, 4)}
        rows.append([variant, text, f"{p50:.3f}", f"{p95:.3f}", f"{p50 - bare:+.3f}"])
    full = float(data["stack-full"]["over_bare_p50_ms"])  # type: ignore[arg-type]
    body = [
        "An empty unary RPC (`EmbeddingService/Info`), loopback, sync client. "
        f"{args.rounds} rounds, variants interleaved, {args.calls} calls each after 200 warm-up calls; "
        "p50 = median of the rounds' p50s, p95 over every call.", "",
        md_table(["variant", "what", "p50 ms", "p95 ms", "p50 over bare"], rows), "",
        f"Target (issue 26): the full stack ≤ bare p50 + 0.3 ms: {full:+.3f} ms, "
        f"{'met' if full <= 0.3 else 'not met'}.", ""]
    print(write_result("grpc_stack", "The gRPC server stack, layer by layer", body,
                       {"variants": data, "target_met": full <= 0.3}, out=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
