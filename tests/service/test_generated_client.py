"""A typed client generated from the served spec builds and runs the docs' example (issue 82).

openapi-python-client (pinned in the dev extra) generates a client from gateway/openapi.json into a
temporary folder; docs/examples/rest_client.py then creates a collection, ingests, waits for the job and
searches through it, against the real gateway under uvicorn over the real embedding and retrieval
services. The proof that the spec is complete enough for a backend team to generate theirs.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.apps import gateway_app, serving

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "korean_inference_mesh_gateway_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("client")
    tool = Path(sys.executable).with_name("openapi-python-client")
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # its ruff pass
    done = subprocess.run([str(tool), "generate", "--path", str(ROOT / "gateway" / "openapi.json"), "--meta", "none",
                           "--output-path", str(out / PACKAGE)], capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    warnings = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("WARNING parsing")]
    # The one operation it cannot type: the masked page, a PNG (its function returns the raw response).
    assert warnings == ["WARNING parsing GET /v1/masking/jobs/{job_id}/pages/{index}.png within ocr."], warnings
    yield out
    shutil.rmtree(out, ignore_errors=True)


async def test_the_generated_client_runs_the_docs_example(generated, embedding_service, retrieval_port):
    sys.path.insert(0, str(generated))
    sys.path.insert(0, str(ROOT / "docs" / "examples"))
    try:
        example = importlib.import_module("rest_client")
        app = gateway_app(embedding_service.port, retrieval_port, reasoning_targets="127.0.0.1:1")
        async with serving(app) as base:
            ids = await asyncio.to_thread(example.run, base, "generated-client")
        assert ids and ids[0] == "b1", ids
    finally:
        sys.path.remove(str(generated))
        sys.path.remove(str(ROOT / "docs" / "examples"))
        for name in [m for m in sys.modules if m == "rest_client" or m.startswith(PACKAGE)]:
            del sys.modules[name]
