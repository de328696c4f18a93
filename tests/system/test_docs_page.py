"""`/docs` renders from the gateway's own files in headless Chromium, with every other host unreachable.

The gateway runs as operators start it (``python -m gateway --port 0``) with every service target on a
closed port: the docs page must need none of them. Chromium resolves no host but 127.0.0.1 (as on a
machine without internet) and writes a network log; the test reads from it every request the page
made (the navigation and what the page's own HTML, CSS and scripts asked for) and checks that each
went to the gateway.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from support import ServiceProcess, free_port, start_module

CHROMIUM = shutil.which("chromium")
TITLE = "Korean inference mesh gateway"
OPERATIONS = ("/v1/search", "/v1/collections/{name}/documents", "/v1/embeddings", "/v1/ocr/jobs", "/v1/chat")
# Chromium's own calls (updates, time, accounts, autofill) cannot resolve here and are told apart below:
# they have no initiator, while everything the page asks for has the gateway's origin as initiator.
ONLY_LOOPBACK = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


@pytest.fixture(scope="module")
def gateway():
    assert CHROMIUM, "chromium missing: run scripts/setup.sh (Debian package chromium)"
    closed = f"127.0.0.1:{free_port()}"
    proc = start_module("gateway", "--port", "0", "--embedding-target", closed, "--retrieval-target", closed,
                        "--ocr-target", closed, "--reasoning-targets", closed, "--trace-exporter", "none",
                        timeout_s=60)
    with proc:
        yield proc


def chromium(url: str, out: Path, *mode: str) -> tuple[str, list[dict]]:
    """Load ``url`` headless; returns stdout and the page's URL requests from Chromium's network log."""
    netlog = out / f"net{len(list(out.iterdir()))}.json"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
         "--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter",
         f"--user-data-dir={out / 'profile'}", f"--host-resolver-rules={ONLY_LOOPBACK}", f"--log-net-log={netlog}",
         "--window-size=1280,1600", "--virtual-time-budget=8000", *mode, url],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, page_requests(json.loads(netlog.read_text()), url)


def page_requests(log: dict, url: str) -> list[dict]:
    """Every URL request of the page at ``url``: its navigation and all that the page initiated."""
    origin = re.match(r"https?://[^/]+", url).group(0)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    started = [e["params"] for e in log["events"] if e["type"] == start_job and "url" in (e.get("params") or {})]
    return [p for p in started if p.get("initiator") == origin
            or (p.get("request_type") == "main frame" and p["url"] == url)]


def test_docs_page_renders_offline_from_gateway_assets(gateway: ServiceProcess, tmp_path: Path):
    url = f"{gateway.base_url}/docs"
    dom, requests = chromium(url, tmp_path, "--dump-dom")
    assert TITLE in dom and "swagger-ui" in dom
    for path in OPERATIONS:
        assert f'data-path="{path}"' in dom, path  # an operation row Swagger UI rendered, not the spec text
    fetched = {r["url"] for r in requests}
    assert {f"{url}", f"{url}/assets/swagger-ui-bundle.js", f"{url}/assets/swagger-ui.css",
            f"{gateway.base_url}/openapi.json"} <= fetched, fetched
    assert all(u.startswith(gateway.base_url + "/") for u in fetched), fetched

    shot = tmp_path / "docs.png"
    _, requests = chromium(url, tmp_path, f"--screenshot={shot}")
    assert all(r["url"].startswith(gateway.base_url + "/") for r in requests), requests
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 1600)
    stats = ImageStat.Stat(image)
    non_white = 1 - sum(image.histogram()[245:]) / (image.size[0] * image.size[1])
    # A page whose script never ran is a blank white sheet (stddev 0); the rendered list is far from it.
    assert stats.stddev[0] > 10 and non_white > 0.03, (stats.stddev, non_white)


def test_docs_html_references_only_the_gateway_and_redoc_is_gone(gateway: ServiceProcess):
    import httpx

    html = httpx.get(gateway.base_url + "/docs", timeout=10).text
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html)
    assert len(links) == 3 and all(link.startswith("/") and not link.startswith("//") for link in links), links
    for link in links:
        assert httpx.get(gateway.base_url + link, timeout=10).status_code == 200, link
    assert '"validatorUrl": null' in html  # the badge would send the spec's address to a public validator
    # ReDoc's bundle loads its logo from a CDN, so the gateway does not serve it.
    assert httpx.get(gateway.base_url + "/redoc", timeout=10).status_code == 404
