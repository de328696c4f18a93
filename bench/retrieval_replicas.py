"""Retrieval replicas in one process, for benches: one writer and reader replicas over one embedded store.

    python -m bench.retrieval_replicas --qdrant-location DIR --reader-ports P1,P2 [retrieval settings...]

The embedded engine's folder cannot be opened by two processes, and no Qdrant server can be had on
these machines, so the replicas share one open store here, each with its own state (threads, catalog
metadata, gates) and gRPC port: the writer on ``--port`` (printed as ``SERVING port=``, as every
service prints it), the readers (``--role reader``) on ``--reader-ports``. Every other argument is a
retrieval setting given to all of them. Runs until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from contextlib import AsyncExitStack
from typing import Any

from prometheus_client import CollectorRegistry

from services.bootstrap.lifecycle import running
from services.retrieval.config import RetrievalSettings
from services.retrieval.server import create_retrieval_service


async def serve(port: int, reader_ports: list[int], settings: dict[str, Any]) -> None:
    """The writer and the readers until a signal."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as stack:
        writer = await create_retrieval_service(RetrievalSettings(port=port, metrics_port=-1, **settings),
                                                registry=CollectorRegistry())
        await stack.enter_async_context(running(writer))
        for p in reader_ports:
            reader = await create_retrieval_service(
                RetrievalSettings(port=p, metrics_port=-1, role="reader", **settings),
                registry=CollectorRegistry(), store=writer.retriever.store)
            await stack.enter_async_context(running(reader))
        print(f"READERS ports={','.join(map(str, reader_ports))}", flush=True)
        print(f"SERVING port={writer.port} metrics_port=-1", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """CLI: ``--port``, ``--reader-ports``; the rest are retrieval settings (``--name value``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval_replicas", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reader-ports", required=True, help="comma-separated ports of the readers")
    parser.add_argument("--log-level", default="WARNING")
    args, rest = parser.parse_known_args(argv)
    if len(rest) % 2:
        parser.error("retrieval settings come as --name value pairs")
    settings: dict[str, Any] = {rest[i].lstrip("-").replace("-", "_"): rest[i + 1] for i in range(0, len(rest), 2)}
    settings["log_level"] = args.log_level
    asyncio.run(serve(args.port, [int(p) for p in args.reader_ports.split(",") if p], settings))


if __name__ == "__main__":
    main()
