"""The ops view as an operator runs it: scripts/run_ops.py with Prometheus, Alertmanager and Phoenix, on free ports.

One span sent over OTLP gRPC and one over OTLP HTTP must show up in Phoenix's REST API (project
"default"); Prometheus must list the five mesh jobs and every alert rule and know the Alertmanager;
everything listens on loopback only; SIGTERM must leave no process behind. A taken port is one line.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from support import eventually, free_port
from support.ports import held_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MESH_JOBS = {"gateway", "embedding", "retrieval", "reasoning", "ocr"}
START_S = 240  # Phoenix runs its migrations on a fresh database (~15 s alone, more on a busy machine)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def poll(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Call ``check`` until it returns something truthy (connection errors count as not yet)."""
    return eventually(check, bool, timeout_s=timeout_s, every_s=0.25, what=what, ignoring=(OSError,))


class Runner:
    """scripts/run_ops.py as a process, its output read line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "scripts/run_ops.py", *args], cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next_lines(self, timeout_s: float) -> Iterator[str | None]:
        """The lines it prints (each kept in ``seen``), then None if it exits, for ``timeout_s`` at most."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return
            if line is not None:
                self.seen.append(line)
            yield line
            if line is None:
                return

    def wait_for(self, needle: str, timeout_s: float) -> None:
        for line in self._next_lines(timeout_s):
            if line is None:
                pytest.fail(f"run_ops.py exited ({self.proc.wait(5)}) before {needle!r}:\n{''.join(self.seen)}")
            if needle in line:
                return
        pytest.fail(f"no {needle!r} from run_ops.py within {timeout_s} s:\n{''.join(self.seen)}")

    def rest(self, timeout_s: float) -> str:
        """Everything it prints until it exits."""
        for line in self._next_lines(timeout_s):
            if line is None:
                return "".join(self.seen)
        pytest.fail(f"run_ops.py did not exit within {timeout_s} s:\n{''.join(self.seen)}")

    def family(self) -> list[psutil.Process]:
        """The runner and every process below it."""
        me = psutil.Process(self.proc.pid)
        return [me, *me.children(recursive=True)]

    def kill(self) -> None:
        """Last resort after a failed test: SIGKILL the runner and everything below it."""
        if self.proc.poll() is not None:
            return
        for p in reversed(self.family()):
            try:
                p.kill()
            except psutil.Error:
                pass
        self.proc.wait(10)


def send_span(service: str, name: str, exporter: Any) -> str:
    """End one span under ``service`` and export it with ``exporter``; returns its trace id (hex)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tests.ops_view").start_as_current_span(name) as span:
        span.set_attribute("mesh.test", "ops-view")
        trace_id = format(span.get_span_context().trace_id, "032x")
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    provider.shutdown()
    return trace_id


def alert_names() -> set[str]:
    rules = yaml.safe_load((ROOT / "infra" / "observability" / "alerts.yml").read_text())
    return {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def test_ops_view_receives_traces_scrapes_the_mesh_and_stops_clean(tmp_path):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    prom, am, phoenix, otlp = free_port(), free_port(), free_port(), free_port()
    runner = Runner("--prometheus-port", str(prom), "--alertmanager-port", str(am), "--phoenix-port", str(phoenix),
                    "--otlp-grpc-port", str(otlp), "--data-dir", str(tmp_path / "ops"))
    tree: list[psutil.Process] = []
    try:
        runner.wait_for("ops view ready", START_S)
        runner.wait_for("Ctrl-C stops", 10)
        banner = "".join(runner.seen)
        assert f"http://127.0.0.1:{phoenix}/projects/" in banner and f"http://127.0.0.1:{otlp}" in banner
        assert f"http://127.0.0.1:{prom}/classic/graph" in banner, banner
        tree = runner.family()
        assert len(tree) >= 4, [p.cmdline()[:3] for p in tree]  # runner, Prometheus, Alertmanager, Phoenix

        # Traces: one span per OTLP protocol, found again through Phoenix's REST API (GET .../spans).
        service = f"ops-view-test-{uuid.uuid4().hex[:8]}"
        sent = {
            send_span(service, f"{service} grpc", GrpcExporter(endpoint=f"http://127.0.0.1:{otlp}", insecure=True,
                                                              timeout=10)): f"{service} grpc",
            send_span(service, f"{service} http", HttpExporter(endpoint=f"http://127.0.0.1:{phoenix}/v1/traces",
                                                              timeout=10)): f"{service} http",
        }
        query = "&".join(f"trace_id={t}" for t in sent)
        spans_url = f"http://127.0.0.1:{phoenix}/v1/projects/default/spans?{query}"

        def stored() -> dict[str, str]:
            got = {s["context"]["trace_id"]: s["name"] for s in get_json(spans_url)["data"]}
            return got if got == sent else {}

        poll(stored, 60, "both spans listed by Phoenix in project default")

        # Metrics and alerts: the five mesh jobs, every alert rule, our Alertmanager.
        base = f"http://127.0.0.1:{prom}/api/v1"
        poll(lambda: {t["labels"]["job"] for t in get_json(f"{base}/targets")["data"]["activeTargets"]} == MESH_JOBS,
             60, f"Prometheus targets {sorted(MESH_JOBS)}")
        expected = alert_names()
        assert len(expected) >= 10
        poll(lambda: {r["name"] for g in get_json(f"{base}/rules")["data"]["groups"] for r in g["rules"]
                      if r["type"] == "alerting"} == expected, 60, "Prometheus alert rules from alerts.yml")
        poll(lambda: [a["url"] for a in get_json(f"{base}/alertmanagers")["data"]["activeAlertmanagers"]]
             == [f"http://127.0.0.1:{am}/api/v2/alerts"], 60, "Prometheus sending to our Alertmanager")
        with urllib.request.urlopen(f"http://127.0.0.1:{am}/-/ready", timeout=5) as resp:
            assert resp.status == 200
        assert get_json(f"http://127.0.0.1:{am}/api/v2/status")["cluster"]["status"] == "disabled"

        # Loopback only: every listening socket of the family, on the ports we gave and no others.
        pids = {p.pid for p in tree}
        listening = [c.laddr for c in psutil.net_connections(kind="tcp")
                     if c.status == psutil.CONN_LISTEN and c.pid in pids and c.laddr]
        assert {addr.port for addr in listening} == {prom, am, phoenix, otlp}, listening
        assert all(addr.ip in ("127.0.0.1", "::ffff:127.0.0.1") for addr in listening), listening

        runner.proc.send_signal(signal.SIGTERM)
        rest = runner.rest(60)
        assert runner.proc.wait(5) == 0, rest[-3000:]
        assert "ops stopped" in rest and "Traceback" not in rest, rest[-3000:]
        gone, alive = psutil.wait_procs(tree, timeout=15)
        assert not alive, [p.cmdline()[:3] for p in alive]
    finally:
        runner.kill()


def test_a_taken_port_is_one_line_and_starts_nothing(tmp_path):
    with held_port() as taken:
        out = subprocess.run([sys.executable, "scripts/run_ops.py", "--prometheus-port", str(free_port()),
                              "--alertmanager-port", str(free_port()), "--phoenix-port", str(taken),
                              "--otlp-grpc-port", str(free_port()), "--data-dir", str(tmp_path / "ops")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    errors = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and f"port {taken} (Phoenix UI and OTLP HTTP) is already in use" in errors[0], errors
    assert "Traceback" not in out.stderr and "starting" not in out.stdout
    assert not (tmp_path / "ops").exists()
