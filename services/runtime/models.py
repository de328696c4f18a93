"""Where built model revisions live (outside git)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_root() -> Path:
    """``$MESH_MODEL_CACHE`` or ``~/.cache/korean-mesh/models``; read when called, never at import."""
    env = os.environ.get("MESH_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "korean-mesh" / "models"


def current_model_dir(cache_root: Path | None = None) -> Path:
    """The folder of the latest built revision (the ``current`` link)."""
    return (cache_root or default_cache_root()) / "current"
