"""Write (``--write``) or check the gateway's OpenAPI snapshot against the served spec and the last release.

Check mode fails when the committed snapshot (``gateway/openapi.json``) is not the spec the gateway
serves now (run ``make openapi``), or when the served spec changes an operation of the last release
(``gateway/releases/``): additions pass, breaks fail.
"""

from __future__ import annotations

import argparse
import sys

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.contract import RELEASE, SNAPSHOT, canonical, changed_operations, released


def served() -> dict:
    """The OpenAPI document the gateway serves at ``/openapi.json``."""
    return create_app(GatewaySettings()).openapi()


def main() -> int:
    """Write the snapshot, or report how the served spec differs from it and from the release."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite gateway/openapi.json from the served spec")
    args = parser.parse_args()
    spec = served()
    if args.write:
        SNAPSHOT.write_text(canonical(spec))
        print(f"wrote {SNAPSHOT.name}")
        return 0
    problems = [f"breaking change against {RELEASE.name}: {p}" for p in changed_operations(released(), spec)]
    if not SNAPSHOT.exists() or SNAPSHOT.read_text() != canonical(spec):
        problems.append(f"{SNAPSHOT.name} is not the served spec: run `make openapi` and commit it")
    for p in problems:
        print(p)
    if not problems:
        print(f"[openapi] the snapshot is the served spec; no breaking change against {RELEASE.name}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
