"""A real redis-server for tests: started on a free port, ready (it answered PING) before use, always stopped."""

from __future__ import annotations

import subprocess
from pathlib import Path

from services.runtime.processes import LaunchError, start_redis, stop_process


class RedisServer:
    """A redis-server without persistence in ``folder``; a context manager, ready when entered.

    Missing ``redis-server`` is a failure naming the fix (scripts/setup.sh installs it), never a skip.
    """

    def __init__(self, folder: Path, port: int = 0) -> None:
        self.folder = folder
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> RedisServer:
        """Start it and return once it answers PING (and is the process listening on its port)."""
        try:
            self.proc, self.url = start_redis(self.folder, self.port)
        except LaunchError as err:
            raise AssertionError(str(err)) from None
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        return self

    def url_for(self, db: int) -> str:
        """The URL of database ``db`` on this server."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def kill(self) -> None:
        """SIGKILL it (Redis going away under a client), and wait until it is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """Stop it and whatever it started."""
        if self.proc is not None:
            stop_process(self.proc, 5.0)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisClusterServers:
    """A real 3-node Redis Cluster on loopback (masters only, the 16384 slots split between them).

    Each node is a redis-server with ``--cluster-enabled yes`` and its bus on a port of its own; the
    cluster is formed with ``redis-cli --cluster create`` and is ready when every node says
    ``cluster_state:ok``. A context manager; ``url`` is one node (the cluster client finds the rest).
    """

    def __init__(self, folder: Path, nodes: int = 3) -> None:
        self.folder = folder
        self.nodes = nodes
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []

    @property
    def url(self) -> str:  # noqa: D102
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def __enter__(self) -> RedisClusterServers:
        import shutil
        import time

        if shutil.which("redis-cli") is None:
            raise AssertionError("redis-cli missing: run scripts/setup.sh (it installs redis-server with it)")
        try:
            for i in range(self.nodes):
                bus = _free_port()
                proc, url = start_redis(self.folder / f"node{i}", 0, extra_args=(
                    "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{i}.conf",
                    "--cluster-port", str(bus), "--cluster-node-timeout", "2000"))
                self.procs.append(proc)
                self.ports.append(int(url.rsplit(":", 1)[1].split("/")[0]))
            subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                            "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                states = [subprocess.run(["redis-cli", "-p", str(p), "cluster", "info"], capture_output=True,
                                         text=True, timeout=5).stdout for p in self.ports]
                if all("cluster_state:ok" in s for s in states):
                    return self
                time.sleep(0.2)
            raise AssertionError(f"the Redis Cluster on {self.ports} did not reach cluster_state:ok")
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            stop_process(proc, 5.0)
