"""The gateway process over real sockets: half-open connections are closed, HTTPS works when configured."""

import socket
import ssl
import time

import httpx

from services.runtime.processes import start_process, stop_process
from support.pki import write_pki


def _gateway(*args: str):
    dead = "127.0.0.1:1"
    return start_process("gateway", "--port", "0", "--embedding-target", dead, "--retrieval-target", dead,
                         "--ocr-target", dead, "--reasoning-targets", dead, *args)


def test_a_connection_that_never_finishes_its_headers_is_closed():
    proc, port = _gateway("--header-timeout-s", "0.5")
    try:
        with socket.create_connection(("127.0.0.1", port)) as slow, socket.create_connection(("127.0.0.1", port)) as ok:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n")  # and never the blank line
            ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
            assert ok.recv(4096).startswith(b"HTTP/1.1 200")  # a whole request is served
            slow.settimeout(10)
            start = time.monotonic()
            assert slow.recv(4096) == b""  # closed by the server, not by our timeout (which would raise)
            assert time.monotonic() - start < 9
    finally:
        stop_process(proc)


def test_https_when_a_certificate_is_configured(tmp_path):
    pki = write_pki(tmp_path)
    proc, port = _gateway("--tls-cert-file", str(pki["server"]), "--tls-key-file", str(pki["server_key"]))
    try:
        context = ssl.create_default_context(cafile=str(pki["ca"]))
        r = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=context)
        assert r.status_code == 200
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            raise AssertionError("plain HTTP was answered on an HTTPS port")
        except httpx.HTTPError:
            pass
    finally:
        stop_process(proc)
