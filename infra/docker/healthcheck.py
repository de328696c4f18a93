"""Container health check of the mesh image: exit 0 when the process in this container serves.

gRPC services answer ``grpc.health.v1.Health/Check`` (the whole server, service ``""``) with
SERVING; the gateway answers ``GET /healthz``. The process is found from the argument
(``healthcheck.py embedding``), else ``MESH_SERVICE``, else the ``python -m <module>`` command line
of a process in the container. The port is the process's ``--port`` flag, else its ``MESH_<NAME>_PORT``
variable, else the service's default.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

DEFAULT_PORTS = {"embedding": 50051, "retrieval": 50052, "reasoning": 50053, "ocr": 50054, "gateway": 8080}
MODULES = {"services.embedding": "embedding", "services.retrieval": "retrieval", "services.reasoning": "reasoning",
           "services.ocr": "ocr", "gateway": "gateway"}
TIMEOUT_S = 4.0


def command_lines() -> list[list[str]]:
    """The argument vectors of the processes visible in this container."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if raw:
                lines.append([part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")])
    return lines


def find_process(argv: list[str]) -> tuple[str, list[str]]:
    """The service name to check and the argument vector it runs with (empty when unknown)."""
    named = argv[1] if len(argv) > 1 else os.environ.get("MESH_SERVICE", "")
    for line in command_lines():
        if "-m" in line[:-1]:
            service = MODULES.get(line[line.index("-m") + 1])
            if service and (not named or service == named):
                return service, line
    if named in DEFAULT_PORTS:
        return named, []
    raise SystemExit("no mesh service found to check (pass its name)")


def port_of(service: str, line: list[str]) -> int:
    """The port from ``--port``/``--port=N``, the service's environment variable, or its default."""
    for i, arg in enumerate(line):
        if arg == "--port" and i + 1 < len(line):
            return int(line[i + 1])
        if arg.startswith("--port="):
            return int(arg.split("=", 1)[1])
    prefix = "MESH_GATEWAY_" if service == "gateway" else f"MESH_{service.upper()}_"
    return int(os.environ.get(f"{prefix}PORT", DEFAULT_PORTS[service]))


def check_grpc(port: int) -> bool:
    """True when the server's overall gRPC health status is SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_S)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def check_http(port: int) -> bool:
    """True when the gateway's liveness endpoint answers 200."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT_S) as reply:
        return reply.status == 200


def main(argv: list[str]) -> int:
    """Check the container's service; 0 healthy, 1 not."""
    service, line = find_process(argv)
    port = port_of(service, line)
    try:
        healthy = check_http(port) if service == "gateway" else check_grpc(port)
    except Exception as exc:  # any failure means unhealthy; say why
        print(f"{service} on port {port}: {exc}", file=sys.stderr)
        return 1
    print(f"{service} on port {port}: {'SERVING' if healthy else 'NOT_SERVING'}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
