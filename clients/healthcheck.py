"""``python -m clients.healthcheck HOST:PORT [SERVICE]``: one health check from a shell or a container probe."""

from __future__ import annotations

from clients.channels import aio_channel
from clients.health import HealthState, check_health


def main(argv: list[str] | None = None) -> None:
    """``python -m clients.healthcheck HOST:PORT [SERVICE]``: print the state; exit 0 only when SERVING."""
    import argparse
    import asyncio

    parser = argparse.ArgumentParser(prog="python -m clients.healthcheck", description=main.__doc__)
    parser.add_argument("target", help="host:port of a mesh service")
    parser.add_argument("service", nargs="?", default="", help="health name, e.g. mesh.ocr.v1.OcrService/jobs "
                        "(default: the whole server)")
    parser.add_argument("--timeout-s", type=float, default=2.0, help="deadline of the check [default 2]")
    args = parser.parse_args(argv)

    async def check() -> HealthState:
        async with aio_channel(args.target) as channel:
            return await check_health(channel, args.service, args.timeout_s)

    state = asyncio.run(check())
    print(state)
    raise SystemExit(0 if state == "SERVING" else 1)


if __name__ == "__main__":
    main()
