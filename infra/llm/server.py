"""Start the embedded LLM server: llama-cpp-python's OpenAI-compatible server in ``.venv-llm``.

``python -m infra.llm.server --port 8081`` (Ctrl-C stops it). The server streams SSE, honours
``response_format: {"type": "json_object", "schema": ...}`` with a grammar, and reuses the KV cache
of the longest common prompt prefix, so append-only chat prompts stay cheap.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from infra.llm.fetch import DEFAULT_MODEL, model_path
from scripts.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]


def llm_venv() -> Path:
    """The LLM server's own virtual environment, made by ``scripts/setup.sh``."""
    return Path(os.environ.get("MESH_LLM_VENV", ROOT / ".venv-llm"))


@dataclass
class LlmServer:
    """A running llama.cpp server."""

    process: subprocess.Popen[bytes]
    port: int
    model: str
    log_path: Path

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL."""
        stop_process(self.process, timeout_s)  # type: ignore[arg-type]


def start_llm_server(port: int, *, model: str = DEFAULT_MODEL, n_ctx: int = 4096, threads: int = 2,
                     log_path: Path | None = None, timeout_s: float = 120.0) -> LlmServer:
    """Start the server on ``127.0.0.1:port`` and wait until it lists its model."""
    gguf = model_path(model)
    if not gguf.exists():
        raise FileNotFoundError(f"{gguf} missing: run python -m infra.llm.fetch (scripts/setup.sh does)")
    python = llm_venv() / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"{python} missing: run scripts/setup.sh")
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"mesh-llm-{port}.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", model,
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
                             "--n_threads", str(threads), "--n_threads_batch", str(threads), "--verbose", "False",
                             # Queue concurrent requests instead of cutting the running one short (the
                             # default stops a stream, with no finish reason, when another request arrives).
                             "--interrupt_requests", "False"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"LLM server exited ({proc.returncode}); log: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1.0).status_code == 200:
                return LlmServer(proc, port, model, log_path)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"LLM server did not answer within {timeout_s:.0f}s; log: {log_path}")


def main() -> None:
    """CLI: start and wait for Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m infra.llm.server", description=__doc__)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    server = start_llm_server(args.port, model=args.model, n_ctx=args.n_ctx, threads=args.threads)
    print(f"SERVING port={server.port} model={server.model} base_url={server.base_url}", flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
