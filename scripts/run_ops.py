"""Run the ops view next to ``make run``: Prometheus, Alertmanager and a trace UI (Arize Phoenix), on loopback.

Prometheus (127.0.0.1:9090) scrapes the mesh with ``infra/observability/prometheus.yml`` and evaluates
``alerts.yml``; Alertmanager (127.0.0.1:9093, no clustering) routes with ``alertmanager.yml``; Phoenix
(from ``.venv-ops``) receives OTLP traces over gRPC on 127.0.0.1:4317 and over HTTP on
127.0.0.1:6006/v1/traces, and shows them in its UI on 6006 (project "default"). Data lives in
``.data/ops/`` (Prometheus TSDB, Alertmanager state, Phoenix's SQLite), logs in ``.data/ops/logs/``.

Every port is checked before anything starts (one line naming a taken one and its holder, exit 2).
Ctrl-C or SIGTERM stops every process it started (whole process groups), start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from services.runtime.processes import (
    LaunchError,
    last_line,
    owns_port,
    require_free_port,
    run_children,
)

ROOT = Path(__file__).resolve().parent.parent
OBSERVABILITY = ROOT / "infra" / "observability"
OPS_PYTHON = ROOT / ".venv-ops" / "bin" / "python"
HOST = "127.0.0.1"
NAMES = ("alertmanager", "prometheus", "phoenix")  # start order (Prometheus finds Alertmanager up)

# Phoenix binds its OTLP gRPC server on every interface ("[::]:PORT", not configurable in 20.x); this
# boot code narrows that one bind to loopback, then runs `phoenix serve` as `python -m phoenix.server.main`.
PHOENIX_BOOT = """\
import sys
import grpc.aio._server as _server
_add = _server.Server.add_insecure_port
def _loopback(self, address):
    return _add(self, "127.0.0.1:" + address.rsplit(":", 1)[1])
_server.Server.add_insecure_port = _loopback
sys.argv = ["phoenix", "serve"]
from phoenix.server.main import main
main()
"""


@dataclass
class Ports:
    """The ops view's listening ports."""

    prometheus: int
    alertmanager: int
    phoenix: int
    otlp_grpc: int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags: every port and the data folder (defaults are the documented fixed ones)."""
    parser = argparse.ArgumentParser(prog="scripts/run_ops.py", description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus-port", type=int, default=9090, help="Prometheus web/API port (9090)")
    parser.add_argument("--alertmanager-port", type=int, default=9093,
                        help="Alertmanager port (9093, where prometheus.yml sends alerts)")
    parser.add_argument("--phoenix-port", type=int, default=6006,
                        help="Phoenix UI, REST API and OTLP HTTP (/v1/traces) port (6006)")
    parser.add_argument("--otlp-grpc-port", type=int, default=4317, help="Phoenix OTLP gRPC port (4317)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".data" / "ops",
                        help="where the three keep their data and logs (.data/ops)")
    parser.add_argument("--ready-timeout-s", type=float, default=180.0,
                        help="how long each may take to become ready (180 s)")
    return parser.parse_args(argv)


def check_tools() -> None:
    """The Debian binaries and the ops environment must be there (one line naming the fix)."""
    for tool in ("prometheus", "prometheus-alertmanager"):
        if shutil.which(tool) is None:
            raise LaunchError(f"{tool} missing: run scripts/setup.sh (it installs Debian's package)")
    if not OPS_PYTHON.exists():
        raise LaunchError(f"{OPS_PYTHON.relative_to(ROOT)} missing: run scripts/setup.sh (it creates .venv-ops)")


def check_ports(ports: Ports) -> None:
    """Every port must be free before anything starts."""
    require_free_port(ports.prometheus, "Prometheus")
    require_free_port(ports.alertmanager, "Alertmanager")
    require_free_port(ports.phoenix, "Phoenix UI and OTLP HTTP")
    require_free_port(ports.otlp_grpc, "Phoenix OTLP gRPC")


def prometheus_config(ports: Ports, folder: Path) -> Path:
    """The committed config when Alertmanager is on 9093; else a copy in ``folder`` sending to the chosen port."""
    source = OBSERVABILITY / "prometheus.yml"
    if ports.alertmanager == 9093:
        return source
    config = yaml.safe_load(source.read_text())
    config["rule_files"] = [str((OBSERVABILITY / rule).resolve()) for rule in config.get("rule_files", [])]
    for manager in config["alerting"]["alertmanagers"]:
        for static in manager["static_configs"]:
            static["targets"] = [f"{HOST}:{ports.alertmanager}"]
    target = folder / "prometheus.yml"
    target.write_text("# Written by scripts/run_ops.py from infra/observability/prometheus.yml\n"
                      + yaml.safe_dump(config, sort_keys=False))
    return target


def launch(name: str, cmd: list[str], logs: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start one process in its own session (Ctrl-C reaches only us), its output to ``logs/<name>.log``."""
    print(f"[ops] starting {name}", flush=True)
    with (logs / f"{name}.log").open("ab") as log:
        return subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


def phoenix_env(ports: Ports, folder: Path) -> dict[str, str]:
    """Phoenix's settings: loopback, our ports, storage in ``folder``, no telemetry or outside requests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    env.update({
        "PHOENIX_HOST": HOST,
        "PHOENIX_PORT": str(ports.phoenix),
        "PHOENIX_GRPC_PORT": str(ports.otlp_grpc),
        "PHOENIX_WORKING_DIR": str(folder),  # SQLite database: <folder>/phoenix.db
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_ENABLE_PROMETHEUS": "false",  # it would bind 9090 on every interface
        "PHOENIX_LOG_MIGRATIONS": "false",
        "TMPDIR": str(folder / "tmp"),  # its pid file
    })
    return env


def start_ops(ports: Ports, data: Path, procs: list[subprocess.Popen]) -> None:
    """Start the three; ``procs`` collects each process as soon as it runs."""
    logs = data / "logs"
    for sub in ("logs", "prometheus", "alertmanager", "phoenix"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    procs.append(launch("alertmanager", [
        "prometheus-alertmanager", f"--config.file={OBSERVABILITY / 'alertmanager.yml'}",
        f"--storage.path={data / 'alertmanager'}", f"--web.listen-address={HOST}:{ports.alertmanager}",
        "--cluster.listen-address="], logs))
    procs.append(launch("prometheus", [
        "prometheus", f"--config.file={prometheus_config(ports, data / 'prometheus')}",
        f"--storage.tsdb.path={data / 'prometheus' / 'tsdb'}", f"--web.listen-address={HOST}:{ports.prometheus}"],
        logs))
    procs.append(launch("phoenix", [str(OPS_PYTHON), "-c", PHOENIX_BOOT], logs,
                        env=phoenix_env(ports, data / "phoenix")))


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """Whether ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def wait_ready(name: str, proc: subprocess.Popen, ready: Callable[[], bool], ports: list[int], log: Path,
               deadline: float) -> None:
    """Poll until ``ready()`` and ``proc`` owns every port; a LaunchError when it exits or time runs out."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            reason = last_line(log.read_text(errors="replace")[-4000:]) if log.exists() else "no output"
            raise LaunchError(f"{name} exited ({proc.returncode}): {reason} (log {log})")
        if ready() and all(owns_port(proc.pid, port) for port in ports):
            return
        time.sleep(0.2)
    raise LaunchError(f"{name} was not ready in time (log {log})")


def default_project_url(ports: Ports) -> str:
    """The Phoenix UI page of project "default" (its projects page when the id cannot be read)."""
    base = f"http://{HOST}:{ports.phoenix}"
    try:
        with urllib.request.urlopen(f"{base}/v1/projects", timeout=5) as resp:
            for project in json.load(resp)["data"]:
                if project["name"] == "default":
                    return f"{base}/projects/{project['id']}"
    except (OSError, ValueError, KeyError):
        pass
    return f"{base}/projects"


def banner(ports: Ports, data: Path) -> str:
    """Where to look: traces, metrics, alerts, and how to send traces."""
    prom = f"http://{HOST}:{ports.prometheus}"
    am = f"http://{HOST}:{ports.alertmanager}"
    logs = data / "logs"
    shown_logs = logs.relative_to(ROOT) if logs.is_relative_to(ROOT) else logs
    return (
        "\nops view ready\n"
        f"  traces   Phoenix UI, project \"default\": {default_project_url(ports)}\n"
        f"           send OTLP to grpc http://{HOST}:{ports.otlp_grpc} or http/protobuf "
        f"http://{HOST}:{ports.phoenix}/v1/traces\n"
        f"           e.g. OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=grpc "
        f"OTEL_EXPORTER_OTLP_ENDPOINT=http://{HOST}:{ports.otlp_grpc}\n"
        f"  metrics  Prometheus {prom}/classic/graph (scrape targets {prom}/classic/targets)\n"
        f"  alerts   Prometheus {prom}/classic/alerts (rules {prom}/classic/rules); Alertmanager (no web UI in "
        f"Debian's package) {am}/api/v2/alerts or `amtool alert query --alertmanager.url={am}`\n"
        f"logs in {shown_logs}/. Ctrl-C stops the ops view.\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Start, wait for each to be ready, print the URLs, run until interrupted, stop everything."""
    args = parse_args(argv)
    ports = Ports(args.prometheus_port, args.alertmanager_port, args.phoenix_port, args.otlp_grpc_port)
    data: Path = args.data_dir.resolve()
    procs: list[subprocess.Popen] = []

    def start() -> None:
        check_tools()
        check_ports(ports)
        start_ops(ports, data, procs)
        alertmanager, prometheus, phoenix = procs
        deadline = time.monotonic() + args.ready_timeout_s
        logs = data / "logs"
        wait_ready("alertmanager", alertmanager, lambda: http_ok(f"http://{HOST}:{ports.alertmanager}/-/ready"),
                   [ports.alertmanager], logs / "alertmanager.log", deadline)
        wait_ready("prometheus", prometheus, lambda: http_ok(f"http://{HOST}:{ports.prometheus}/-/ready"),
                   [ports.prometheus], logs / "prometheus.log", deadline)
        wait_ready("phoenix", phoenix, lambda: http_ok(f"http://{HOST}:{ports.phoenix}/"),
                   [ports.phoenix, ports.otlp_grpc], logs / "phoenix.log", deadline)
        print(banner(ports, data), flush=True)

    run_children("[ops]", procs, start, stopped="ops stopped",
                 describe=lambda p: NAMES[procs.index(p)] if p in procs else str(p.pid))

if __name__ == "__main__":
    main()
