"""bench.report's one result shape, and bench.load against a real HTTP server on a loopback port."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time

import pytest

from bench.load import run_load
from bench.report import ROOT, command_line, write_result


def test_a_result_is_json_and_markdown_under_one_header(tmp_path):
    text = write_result("unit", "Unit bench", ["- a note", "", "| a |", "|---|", "| 1 |"],
                        {"rows": [{"a": 1}], "ratio": 0.5}, out=tmp_path, command="python -m bench.unit --n 3")
    doc = json.loads((tmp_path / "unit.json").read_text())
    assert list(doc)[:4] == ["run", "machine", "git", "command"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["run"])
    assert {"cpu", "cores", "memory", "os", "python"} <= set(doc["machine"])
    assert re.fullmatch(r"[0-9a-f]{4,40}", doc["git"]["revision"]) and isinstance(doc["git"]["dirty"], bool)
    assert doc["command"] == "python -m bench.unit --n 3"
    assert doc["rows"] == [{"a": 1}] and doc["ratio"] == 0.5
    md = (tmp_path / "unit.md").read_text()
    assert md == text
    lines = md.splitlines()
    assert lines[0] == "# Unit bench" and lines[2] == f"- Run: {doc['run']}"
    assert lines[3] == "- Command: `python -m bench.unit --n 3`"
    assert lines[4].startswith(f"- Git: `{doc['git']['revision']}`") and lines[5].startswith("- Machine: ")
    assert lines[7:] == ["- a note", "", "| a |", "|---|", "| 1 |"]


def test_figures_may_not_overwrite_the_header(tmp_path):
    with pytest.raises(ValueError, match="run"):
        write_result("unit", "Unit bench", [], {"run": "yesterday"}, out=tmp_path, command="x")
    assert not (tmp_path / "unit.json").exists()


def test_the_command_line_names_paths_in_the_checkout_relatively():
    line = command_line("bench.unit", ["--data", str(ROOT / "bench" / "data"), f"--out={ROOT / 'x'}", "--n", "3"])
    assert line == "python -m bench.unit --data bench/data --out=x --n 3"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path == "/busy":
            self._send(429, b'{"error": "busy"}', "application/json", **{"retry-after": "1"})
        elif self.path == "/plain":
            self._send(500, b"oops", "text/plain")
        else:
            if self.path == "/slow":
                time.sleep(0.3)
            self._send(200, b'{"ok": true}', "application/json")

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b"".join(f"event: {e}\ndata: {{}}\n\n".encode() for e in ("delta", "delta", "delta", "done"))
        self._send(200, body, "text/event-stream")


@pytest.fixture(scope="module")
def base():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_bounded_load_counts_statuses_and_times_every_answer(base):
    result = run_load(base, 20, 4, lambda i: ("GET", "/busy" if i % 4 == 0 else "/ok", {}), time_limit_s=20)
    assert result.counts() == {"200": 15, "429": 5}
    assert len(result.latencies()) == 20 and len(result.latencies(200)) == 15
    assert all(o.retry_after and o.json_body for o in result.outcomes if o.status == 429)
    assert result.per_s() > 0 and result.plain_5xx() == 0


def test_plain_text_5xx_and_event_streams_are_told_apart(base):
    result = run_load(base, 2, 2, lambda i: ("GET", "/plain", {}) if i == 0 else ("POST", "/chat", {"json": {}}))
    plain, stream = result.outcomes
    assert plain.plain_5xx and plain.stream_done is None
    assert stream.status == 200 and stream.stream_done
    assert [name for name, _ in stream.events or []] == ["delta", "delta", "delta", "done"]
    assert stream.first_event_s("delta") is not None and stream.first_event_s("error") is None


def test_the_load_stops_by_itself(base):
    started = time.perf_counter()
    result = run_load(base, 40, 2, lambda i: ("GET", "/slow", {}), time_limit_s=0.5, timeout_s=5)
    assert time.perf_counter() - started < 3
    assert 0 < result.counts().get("200", 0) < 40 and result.counts()["not sent"] > 0
    late = run_load(base, 1, 1, lambda i: ("GET", "/slow", {}), timeout_s=0.05)
    assert late.counts() == {"timeout": 1}


def test_only_loopback_is_loaded():
    with pytest.raises(ValueError, match="loopback"):
        run_load("http://10.0.0.1:9", 1, 1, lambda i: ("GET", "/", {}))
