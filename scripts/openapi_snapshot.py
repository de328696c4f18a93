"""Write (``--write``) or check the committed OpenAPI snapshot of the gateway's REST contract."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gateway.app import create_app
from gateway.config import GatewaySettings

SNAPSHOT = Path(__file__).resolve().parent.parent / "gateway" / "openapi.json"


def current() -> dict:
    """The OpenAPI document the code generates now."""
    return create_app(GatewaySettings()).openapi()


def main() -> int:
    """Write the snapshot, or report operations that changed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    spec = current()
    if args.write:
        SNAPSHOT.write_text(json.dumps(spec, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"wrote {SNAPSHOT.name}")
        return 0
    from gateway.contract import changed_operations

    problems = changed_operations(json.loads(SNAPSHOT.read_text()), spec)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
