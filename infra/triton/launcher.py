"""Start a real ``tritonserver`` (from the nvidia-pytriton wheel) on the CPU, without Docker.

The wheel carries the server binary and the Python backend only. The launcher lays out a run
folder (backend with the stub for this interpreter, the model repository with the built ONNX files
linked into version 1), starts the server on the given ports and stops it by PID.
Usage: ``python -m infra.triton.launcher --grpc-port 8001`` (Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.processes import LaunchError, interrupt_on_sigterm, owns_port, require_free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = Path(__file__).resolve().parent / "model_repository"
MODEL_NAME = "e5_small"
ONNX_FILES = ("model.onnx", "model.int8.onnx")


def triton_venv() -> Path:
    """Triton's own virtual environment (numpy<2), made by ``scripts/setup.sh``."""
    return Path(os.environ.get("MESH_TRITON_VENV", ROOT / ".venv-triton"))


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3.*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {venv}; run scripts/setup.sh")
    return found[0]


@dataclass
class TritonProcess:
    """A running tritonserver and the folder it runs from."""

    process: subprocess.Popen[bytes]
    run_dir: Path
    grpc_port: int
    http_port: int
    log_path: Path
    _owns_dir: bool = field(default=True, repr=False)
    host: str = "127.0.0.1"

    @property
    def grpc_url(self) -> str:
        """host:port of the gRPC endpoint (loopback when it binds every interface)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{host}:{self.grpc_port}"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Block until the model answers ready (or raise with the server's log)."""
        import tritonclient.grpc as tgrpc

        client = tgrpc.InferenceServerClient(self.grpc_url)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"tritonserver exited ({self.process.returncode}):\n{self.log_tail()}")
                try:  # ready, and answered by the server we started (not whatever held the port)
                    if client.is_model_ready(MODEL_NAME, client_timeout=1.0) and owns_port(self.process.pid,
                                                                                            self.grpc_port):
                        return
                except Exception:  # noqa: BLE001 - not up yet
                    pass
                time.sleep(0.25)
        finally:
            client.close()
        raise TimeoutError(f"tritonserver not ready after {timeout_s}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM to its process group (server and Python-backend stubs), then SIGKILL; removes the run folder."""
        stop_process(self.process, timeout_s)
        if self._owns_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def prepare_run_dir(model_dir: Path, precision: str, run_dir: Path, intra_op_threads: int = 0) -> Path:
    """Lay out backends/ and models/ for one server; returns the models folder."""
    venv_site = _site_packages(triton_venv())
    dist = venv_site / "pytriton" / "tritonserver"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    backend = run_dir / "backends" / "python"
    shutil.copytree(dist / "backends" / "python", backend, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(dist / "python_backend_stubs" / py / "triton_python_backend_stub", backend)
    models = run_dir / "models"
    shutil.copytree(REPOSITORY, models, ignore=shutil.ignore_patterns("__pycache__"))
    config = models / MODEL_NAME / "config.pbtxt"
    text = config.read_text()
    text = text.replace('key: "precision" value { string_value: "int8" }',
                        f'key: "precision" value {{ string_value: "{precision}" }}')
    text = text.replace('key: "intra_op_threads" value { string_value: "0" }',
                        f'key: "intra_op_threads" value {{ string_value: "{intra_op_threads}" }}')
    config.write_text(text)
    for name in ONNX_FILES:
        src = model_dir / name
        if src.exists():
            (models / MODEL_NAME / "1" / name).symlink_to(src.resolve())
    return models


def start_triton(
    model_dir: Path,
    precision: str = "int8",
    grpc_port: int = 8001,
    http_port: int = 8000,
    metrics_port: int = 8002,
    intra_op_threads: int = 0,
    run_dir: Path | None = None,
    host: str = "127.0.0.1",
) -> TritonProcess:
    """Start tritonserver serving ``e5_small`` from the built model folder, bound to ``host`` only.

    Raises :class:`LaunchError` (one line) when one of its ports is taken.
    """
    for port, what in ((grpc_port, "Triton gRPC"), (http_port, "Triton HTTP"), (metrics_port, "Triton metrics")):
        require_free_port(port, what, host)
    owns = run_dir is None
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="mesh-triton-"))
    models = prepare_run_dir(model_dir, precision, run_dir, intra_op_threads)
    venv_site = _site_packages(triton_venv())
    binary = venv_site / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    env = dict(os.environ)
    libdirs = [str(Path(sysconfig.get_config_var("LIBDIR"))), str(venv_site / "nvidia_pytriton.libs")]
    env["LD_LIBRARY_PATH"] = ":".join(libdirs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    # The stub embeds Python in isolated mode (PYTHONPATH is ignored) but finds its interpreter
    # on PATH; with Triton's venv first, pyvenv.cfg makes that venv's site-packages (numpy<2) win.
    env["PATH"] = f"{triton_venv() / 'bin'}:{env.get('PATH', '')}"
    cmd = [
        str(binary), f"--model-repository={models}", f"--backend-directory={run_dir / 'backends'}",
        f"--grpc-address={host}", f"--http-address={host}", f"--metrics-address={host}",
        f"--grpc-port={grpc_port}", f"--http-port={http_port}", f"--metrics-port={metrics_port}",
        "--model-control-mode=explicit", f"--load-model={MODEL_NAME}", "--exit-on-error=true",
        "--disable-auto-complete-config", "--exit-timeout-secs=5", "--log-verbose=0",
    ]
    log_path = run_dir / "tritonserver.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return TritonProcess(proc, run_dir, grpc_port, http_port, log_path, owns, host)


def main(argv: list[str] | None = None) -> None:
    """Run tritonserver until SIGTERM or Ctrl-C, which stop it and its stubs; start-up errors are one line."""
    from services.runtime.models import current_model_dir

    prog = "python -m infra.triton.launcher"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--model-dir", type=Path, default=None, help="built model folder (default: current)")
    parser.add_argument("--precision", choices=["fp32", "int8"], default="int8", help="model weights to serve")
    parser.add_argument("--host", default="127.0.0.1", help="address every endpoint binds [default 127.0.0.1]")
    parser.add_argument("--grpc-port", type=int, default=8001, help="gRPC port [default 8001]")
    parser.add_argument("--http-port", type=int, default=8000, help="HTTP port [default 8000]")
    parser.add_argument("--metrics-port", type=int, default=8002, help="Prometheus metrics port [default 8002]")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="how long to wait for the model to load")
    parser.add_argument("--debug", action="store_true", help="print tracebacks for start-up errors")
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    triton = None
    try:
        model_dir = args.model_dir or current_model_dir()
        if not (model_dir / "model.int8.onnx").exists() and not (model_dir / "model.onnx").exists():
            raise LaunchError(f"no ONNX model in {model_dir}: run .venv/bin/python -m services.embedding.modelbuild")
        triton = start_triton(model_dir, args.precision, args.grpc_port, args.http_port, args.metrics_port,
                              host=args.host)
        try:
            triton.wait_ready(args.timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            print(f"{prog}: error: tritonserver did not become ready: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        print(f"SERVING port={args.grpc_port} pid={triton.process.pid} grpc {triton.grpc_url}", flush=True)
        code = triton.process.wait()
        print(f"{prog}: error: tritonserver exited ({code}):\n{triton.log_tail()}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    except (LaunchError, FileNotFoundError) as exc:
        if args.debug:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: stop the server and its stubs
        pass
    finally:
        if triton is not None:
            triton.stop()

if __name__ == "__main__":
    main()
