"""Start the embedded LLM server: llama.cpp's own OpenAI-compatible ``llama-server``.

``python -m infra.llm.server --port 8081`` (Ctrl-C stops it). The server streams SSE, honours
``response_format: {"type": "json_object", "schema": ...}`` (and ``json_schema``) with a grammar, and
reuses the KV cache of the longest common prompt prefix, so append-only chat prompts stay cheap.
``scripts/setup.sh`` builds the binary for this CPU (infra/llm/build_server.sh) and links its folder
as ``.llama-server/``; ``MESH_LLAMA_SERVER`` names another binary.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from infra.llm.fetch import DEFAULT_MODEL, model_path
from services.runtime.processes import (
    LaunchError,
    interrupt_on_sigterm,
    last_line,
    owns_port,
    require_free_port,
    stop_process,
)

ROOT = Path(__file__).resolve().parents[2]
PROG = "python -m infra.llm.server"
# DRY sampling ("don't repeat yourself": penalises repeating a token sequence already in the context;
# quotes and colons break sequences, so the JSON's keys are not penalised). The small model otherwise
# writes one card's sentence pattern into every card of a reasons answer and repeats phrases. Chosen on
# bench/reasoning.py's queries (first answers passing every check, with the batched reasons prompt of
# the time: bench/results/llm_sampling.md); reported on bench/data/reasoning_set.json by bench.llm_select.
DRY_MULTIPLIER = 0.8


def llama_server_binary() -> Path:
    """The llama-server binary ``scripts/setup.sh`` built (``MESH_LLAMA_SERVER`` overrides)."""
    return Path(os.environ.get("MESH_LLAMA_SERVER", ROOT / ".llama-server" / "bin" / "llama-server"))


@dataclass
class LlmServer:
    """A running llama.cpp server (the leader of its own process group)."""

    process: subprocess.Popen[bytes]
    port: int
    model: str
    log_path: Path

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM to its process group, then SIGKILL."""
        stop_process(self.process, timeout_s)


def start_llm_server(port: int, *, model: str = DEFAULT_MODEL, n_ctx: int = 4096, threads: int = 2,
                     dry_multiplier: float = DRY_MULTIPLIER, draft: str | None = None,
                     speculation: str | None = None,
                     log_path: Path | None = None, timeout_s: float = 120.0) -> LlmServer:
    """Start the server on ``127.0.0.1:port`` and wait until *it* (not another process) lists its model.

    ``draft``: a smaller GGUF of the same family (a name ``infra.llm.fetch`` knows) that proposes tokens
    the model then checks in one pass (speculative decoding: the output is the model's own); default
    ``MESH_LLM_DRAFT`` from the environment, empty for none. ``speculation``: llama-server's draft-free
    speculation instead (``ngram-simple``, ``ngram-mod`` …: tokens proposed from what the context already
    holds); default ``MESH_LLM_SPECULATION``. Raises :class:`LaunchError` (one line) when the port is
    taken, a file is missing or the server exits or never answers.
    """
    draft = os.environ.get("MESH_LLM_DRAFT", "") if draft is None else draft
    speculation = os.environ.get("MESH_LLM_SPECULATION", "") if speculation is None else speculation
    speculative: list[str] = ["--spec-type", speculation] if speculation else []
    if draft:
        draft_gguf = model_path(draft)
        if not draft_gguf.exists():
            raise LaunchError(f"draft model file {draft_gguf.name} missing: run .venv/bin/python -m infra.llm.fetch "
                              f"--model {draft}")
        speculative += ["--model-draft", str(draft_gguf), "--threads-draft", str(threads),
                        "--threads-batch-draft", str(threads)]
    gguf = model_path(model)
    if not gguf.exists():
        raise LaunchError(f"model file {gguf.name} missing: run .venv/bin/python -m infra.llm.fetch "
                          "(scripts/setup.sh does)")
    binary = llama_server_binary()
    if not binary.exists():
        raise LaunchError(f"the LLM server binary {binary} is missing: run scripts/setup.sh "
                          "(it builds llama-server for this CPU)")
    require_free_port(port, "LLM server")
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"mesh-llm-{port}.log"
    with log_path.open("wb") as log:
        # One slot: concurrent requests queue behind the running one (on two cores, parallel slots
        # only share the same cores); the web UI is off (an API server only).
        proc = subprocess.Popen([str(binary), "--model", str(gguf), "--alias", model, "--host", "127.0.0.1",
                                 "--port", str(port), "--ctx-size", str(n_ctx), "--threads", str(threads),
                                 "--threads-batch", str(threads), "--parallel", "1", "--no-ui",
                                 "--dry-multiplier", str(dry_multiplier), *speculative],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = LlmServer(proc, port, model, log_path)
    try:
        _wait_answering(server, timeout_s)
    except BaseException:  # failed or interrupted (Ctrl-C, SIGTERM): never leave the server behind
        server.stop()
        raise
    return server


def _wait_answering(server: LlmServer, timeout_s: float) -> None:
    proc, port, log_path = server.process, server.port, server.log_path
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = last_line(log_path.read_text(errors="replace"))
            raise LaunchError(f"LLM server exited ({proc.returncode}) on port {port}: {tail} (log: {log_path})")
        try:
            # /health answers 503 while the model loads, 200 once requests can run.
            answered = all(httpx.get(f"http://127.0.0.1:{port}{path}", timeout=1.0).status_code == 200
                           for path in ("/health", "/v1/models"))
        except httpx.HTTPError:
            answered = False
        if answered and owns_port(proc.pid, port):
            return
        time.sleep(0.2)
    raise LaunchError(f"LLM server did not answer on port {port} within {timeout_s:.0f}s (log: {log_path})")


def main(argv: list[str] | None = None) -> None:
    """CLI: start, print SERVING, stop the server (its whole process group) on SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("--port", type=int, default=8081, help="port on 127.0.0.1 to serve the OpenAI API on "
                        "[default 8081]")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"model id (infra/llm/fetch.py) [default {DEFAULT_MODEL}]")
    parser.add_argument("--n-ctx", type=int, default=4096, help="context window in tokens [default 4096]")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for generation and prompt "
                        "evaluation [default 2]")
    parser.add_argument("--dry-multiplier", type=float, default=DRY_MULTIPLIER,
                        help=f"DRY repetition penalty (0 disables) [default {DRY_MULTIPLIER}]")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="how long to wait for the server to "
                        "answer [default 120]")
    parser.add_argument("--debug", action="store_true", help="print tracebacks for start-up errors")
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    server = None
    try:
        server = start_llm_server(args.port, model=args.model, n_ctx=args.n_ctx, threads=args.threads,
                                  dry_multiplier=args.dry_multiplier,
                                  timeout_s=args.timeout_s)
        print(f"SERVING port={server.port} pid={server.process.pid} model={server.model} "
              f"base_url={server.base_url}", flush=True)
        code = server.process.wait()
        print(f"{PROG}: error: the LLM server exited ({code}); log: {server.log_path}", file=sys.stderr,
              flush=True)
        raise SystemExit(1)
    except LaunchError as exc:
        if args.debug:
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: a clean stop
        pass
    finally:
        if server is not None:
            server.stop()

if __name__ == "__main__":
    main()
