"""One shape for every bench result: ``<name>.json`` and ``<name>.md`` under one header.

The header says when the run ended (``run``, ISO-8601 UTC), on what machine (``machine``), at which
revision of this repository (``git``: the short hash and whether the tree had uncommitted changes)
and by which command line (``command``); the bench's own figures and sections follow it. A bench
builds its markdown body and its figures, then calls :func:`write_result` once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import ROOT, machine_info

RESULTS = ROOT / "bench" / "results"


def git_revision(root: Path = ROOT) -> dict[str, Any]:
    """The checkout's short commit hash and whether tracked files differ from it (``None``: no git here)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"revision": "unknown", "dirty": None}
    return {"revision": rev, "dirty": bool(status.strip())}


def _portable(arg: str) -> str:
    """An argument with an absolute path inside the checkout's parent written relative to the checkout."""
    key, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
    if os.path.isabs(value) and Path(value).resolve().is_relative_to(ROOT.parent):
        value = os.path.relpath(Path(value).resolve(), ROOT)
    return f"{key}{eq}{value}"


def command_line(module: str | None = None, argv: Sequence[str] | None = None) -> str:
    """``python -m <module> <argv>`` as typed (default: this process's main module and arguments)."""
    if module is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name.removesuffix(".__main__") if spec is not None else Path(sys.argv[0]).stem
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["python", "-m", module, *(_portable(a) for a in args)])


@dataclass(frozen=True)
class RunHeader:
    """When, where, at which revision and by which command a result was produced."""

    run: str
    machine: dict[str, str]
    git: dict[str, Any]
    command: str

    @classmethod
    def collect(cls, command: str | None = None) -> RunHeader:
        """The header of a result written now (``command``: default :func:`command_line`)."""
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(now, machine_info(), git_revision(), command or command_line())

    def as_dict(self) -> dict[str, Any]:
        """The JSON header, in its order."""
        return {"run": self.run, "machine": self.machine, "git": self.git, "command": self.command}

    def markdown(self) -> list[str]:
        """The markdown header lines."""
        m, g = self.machine, self.git
        dirty = {True: " (uncommitted changes)", False: "", None: ""}[g["dirty"]]
        return [f"- Run: {self.run}",
                f"- Command: `{self.command}`",
                f"- Git: `{g['revision']}`{dirty}",
                f"- Machine: {m['cpu']}, {m['cores']} cores ({m['simd']}), {m['memory']}, {m['os']}, "
                f"Python {m['python']}"]


HEADER_KEYS = tuple(f.name for f in dataclasses.fields(RunHeader))


def render(title: str, body: Sequence[str], header: RunHeader) -> str:
    """The markdown of a result: title, header, the bench's own lines."""
    text = "\n".join([f"# {title}", "", *header.markdown(), "", *body])
    return text.rstrip("\n") + "\n"


def _jsonable(value: Any) -> Any:
    """What ``json.dumps`` cannot write itself: dataclasses, numpy values, paths; anything else as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return str(value)


def write_result(name: str, title: str, body: Sequence[str], figures: Mapping[str, Any], *,
                 out: Path = RESULTS, command: str | None = None, header: RunHeader | None = None) -> str:
    """Write ``out/<name>.json`` (header, then ``figures``) and ``out/<name>.md`` (header, then ``body``).

    Returns the markdown. ``figures`` may not use the header's keys.
    """
    clash = sorted(set(figures) & set(HEADER_KEYS))
    if clash:
        raise ValueError(f"figures use the header's keys: {', '.join(clash)}")
    header = header or RunHeader.collect(command)
    text = render(title, body, header)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({**header.as_dict(), **figures}, indent=1, ensure_ascii=False,
                                                 default=_jsonable) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(text, encoding="utf-8")
    return text
