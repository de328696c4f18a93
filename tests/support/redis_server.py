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
