"""Regenerate the Python gRPC stubs from ``protos/`` into ``gen/python`` (never edit the output)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "gen" / "python"


def main() -> int:
    """Run protoc for every .proto file; add ``__init__.py`` so the output is a package tree."""
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    rc = protoc.main([
        "grpc_tools.protoc", f"-I{PROTOS}", f"-I{include}",
        f"--python_out={OUT}", f"--pyi_out={OUT}", f"--grpc_python_out={OUT}", *files,
    ])
    if rc != 0:
        return rc
    for folder in [*[p for p in OUT.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    print(f"generated {len(files)} proto file(s) into {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
