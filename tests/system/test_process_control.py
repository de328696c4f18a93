"""Processes as operators start them: a taken port, a bad setting, missing files, SIGTERM to every launcher.

Each misconfiguration must end in one line naming the setting, file or port (exit 2, no traceback);
SIGTERM to a launcher (LLM server, Triton, the mesh runner) must leave no child process behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from services.runtime.processes import port_holders, start_process
from support import free_port
from support.ports import held_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m ...`` to completion (it must exit by itself)."""
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})})


def one_line_error(out: subprocess.CompletedProcess, *needles: str) -> str:
    """Assert exit 2 with exactly one error line on stderr that names every needle, and no traceback."""
    assert out.returncode == 2, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr + out.stdout, out.stderr[-3000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1, lines
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize("module", ["services.embedding", "services.retrieval", "services.reasoning",
                                    "services.ocr", "gateway"])
def test_a_taken_port_is_one_line_naming_it(module, tmp_path):
    extra = ["--qdrant-location", str(tmp_path / "q")] if module == "services.retrieval" else []
    with held_port() as port:
        out = run(module, "--port", str(port), *extra)
    one_line_error(out, f"port {port}", "--port")


@pytest.mark.parametrize("args, env, needles", [
    (["services.retrieval", "--port", "70000"], {}, ["--port", "70000"]),
    (["services.ocr"], {"MESH_OCR_ENGINES": "many"}, ["MESH_OCR_ENGINES", "engines"]),
    (["gateway", "--redis-url", "localhost:6379"], {}, ["--redis-url", "redis://"]),
    (["gateway", "--port", "0"], {"MESH_GATEWAY_ALLOW_NO_AUTH": "0"}, ["no API key", "--allow-no-auth"]),
    (["services.embedding", "--port", "0", "--model-dir", "/nonexistent/model"], {}, ["/nonexistent/model",
                                                                                    "modelbuild"]),
    (["services.ocr", "--port", "0", "--languages", "kor+xyz"], {}, ["xyz", "--languages"]),
])
def test_misconfiguration_is_one_line_with_exit_2(args, env, needles):
    one_line_error(run(*args, env=env), *needles)


def test_debug_adds_the_traceback():
    out = run("services.embedding", "--port", "0", "--model-dir", "/nonexistent/model", "--debug")
    assert out.returncode == 2 and "Traceback" in out.stderr


def test_llm_launcher_refuses_a_taken_port_even_when_something_answers_there():
    import http.server
    import threading

    class Models(http.server.BaseHTTPRequestHandler):  # another program that also answers /v1/models
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        def log_message(self, *args):
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        port = other.server_address[1]
        out = run("infra.llm.server", "--port", str(port))
        one_line_error(out, f"port {port}", "in use")
        assert "SERVING" not in out.stdout
    finally:
        other.shutdown()
        other.server_close()


def loopback(ip: str) -> bool:
    """Whether a listening address is loopback only (IPv4-mapped IPv6 included)."""
    import ipaddress

    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def family(pid: int) -> list[psutil.Process]:
    """The process and every descendant alive now."""
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def assert_all_gone(procs: list[psutil.Process], timeout_s: float = 20) -> None:
    """Every process in ``procs`` has exited (no orphan left behind)."""
    _gone, alive = psutil.wait_procs(procs, timeout=timeout_s)
    assert not alive, [(p.pid, p.cmdline()[:4]) for p in alive]


def test_sigterm_to_the_llm_launcher_stops_the_server():
    port = free_port()
    proc, reported = start_process("infra.llm.server", "--port", str(port), timeout_s=180)
    assert reported == port
    tree = family(proc.pid)
    assert len(tree) >= 2 and any(p.pid in port_holders(port) for p in tree)  # its own child answers
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert_all_gone(tree)
    assert not port_holders(port)


def test_triton_launcher_binds_loopback_and_sigterm_leaves_no_server_or_stub():
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    proc, _ = start_process("infra.triton.launcher", "--grpc-port", str(grpc_port), "--http-port", str(http_port),
                            "--metrics-port", str(metrics_port), timeout_s=180)
    try:
        tree = family(proc.pid)
        assert any("tritonserver" in " ".join(p.cmdline()) for p in tree)
        listening = [c for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
                     and c.pid in {p.pid for p in tree}]
        assert {c.laddr.port for c in listening} >= {grpc_port, http_port, metrics_port}
        assert all(loopback(c.laddr.ip) for c in listening), listening
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert_all_gone(tree)


def test_runner_refuses_a_taken_port_before_starting_anything():
    from scripts.run_mesh import SERVICES

    gateway_port = next(port for name, _m, port, _mp in SERVICES if name == "gateway")
    if port_holders(gateway_port):
        pytest.fail(f"port {gateway_port} is held by another process on this machine; the test needs it free")
    with held_port(gateway_port):
        out = subprocess.run([sys.executable, "scripts/run_mesh.py"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"port {gateway_port} (gateway) is already in use" in out.stderr and "Traceback" not in out.stderr
    assert "starting" not in out.stdout  # nothing was started


def test_sigterm_to_the_runner_mid_start_leaves_no_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "scripts/run_mesh.py"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:  # Redis, the LLM server and embedding run; retrieval is starting
            if "[mesh] starting retrieval" in line or time.monotonic() > deadline:
                break
        tree = family(proc.pid)
        assert len(tree) >= 4, [p.cmdline()[:3] for p in tree]  # runner, Redis, LLM server, embedding, ...
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest[-2000:]
    assert "mesh stopped" in rest and "Traceback" not in rest
    assert_all_gone(tree)


@pytest.mark.parametrize("module", ["services.embedding", "services.retrieval", "services.reasoning", "services.ocr",
                                    "gateway", "infra.llm.server", "infra.llm.fetch", "infra.triton.launcher",
                                    "services.embedding.modelbuild"])
def test_every_help_option_is_described(module):
    out = run(module, "--help", timeout_s=60)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("options:", 1)[1].splitlines()
    undescribed = []
    for i, line in enumerate(lines):
        if not line.startswith("  -"):
            continue
        same_line = len(line.strip().split("  ")) > 1  # "--flag VALUE   help text"
        next_line = i + 1 < len(lines) and lines[i + 1].startswith(" " * 8) and not lines[i + 1].strip().startswith("-")
        if not (same_line or next_line):
            undescribed.append(line.strip())
    assert not undescribed, undescribed


@pytest.mark.parametrize("module, args", [("services.embedding", ["--intra-op-threads", "1"]), ("gateway", [])])
def test_workers_share_one_port_and_stop_together(module, args):
    proc, port = start_process(module, "--port", "0", "--workers", "2", *args, timeout_s=180)
    try:
        tree = family(proc.pid)
        holders = port_holders(port)
        assert len(holders) == 2 and holders <= {p.pid for p in tree}, (holders, [p.pid for p in tree])
        if module == "gateway":
            assert httpx_get(f"http://127.0.0.1:{port}/healthz") == 200
        else:
            from clients import EmbeddingClient

            with EmbeddingClient(f"127.0.0.1:{port}") as client:
                assert client.embed(["워커 두 개"]).vectors.shape == (1, 384)
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert_all_gone(tree)


def test_retrieval_workers_refuse_the_embedded_engine_in_one_line(tmp_path):
    out = run("services.retrieval", "--port", "0", "--workers", "2", "--qdrant-location", str(tmp_path / "q"))
    one_line_error(out, "Qdrant server", "--qdrant-location")


def httpx_get(url: str) -> int:
    """GET ``url``; its status code."""
    import httpx

    return httpx.get(url, timeout=10).status_code


@pytest.mark.parametrize("module", ["services.reasoning", "gateway"])
def test_a_taken_metrics_port_is_one_line_naming_it(module):
    with held_port() as port:
        out = run(module, "--port", "0", "--metrics-port", str(port))
    one_line_error(out, f"metrics port {port}", "--metrics-port")
