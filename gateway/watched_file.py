"""An operator's file read at start and again when it changes: the keys file, the quotas file.

At start a file that does not parse stops the gateway with one line naming it (``error``). Later it is
read again when its modification time changes, looked at once a second at most; a change that does not
parse keeps the value before it, logged once per change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

import yaml
from pydantic import ValidationError

log = logging.getLogger(__name__)
T = TypeVar("T")
PROBLEMS = (OSError, ValueError, yaml.YAMLError, ValidationError)


def one_line(err: Exception) -> str:
    """An error of a file as one line (a validation error: where and what, e.g. ``keys.0.groups.0: Input …``)."""
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        return ".".join(str(p) for p in first["loc"]) + ": " + first["msg"]
    return str(err).splitlines()[0] if str(err) else type(err).__name__


class WatchedFile(Generic[T]):
    """``parse`` of the file at ``path`` (``empty`` when there is none), kept current with the file."""

    def __init__(self, path: Path | None, parse: Callable[[str], T], empty: T, what: str,
                 error: type[Exception]) -> None:
        self.path = path
        self._parse = parse
        self._value = empty
        self.what = what
        self._mtime: float | None = None
        self._looked = 0.0
        if path is not None:
            try:
                self._value = parse(path.read_text(encoding="utf-8"))
                self._mtime = path.stat().st_mtime
            except PROBLEMS as err:
                raise error(f"{path.name}: {one_line(err)}") from None

    @property
    def value(self) -> T:
        """The parsed file as it is now (read again if it changed since it was last looked at)."""
        now = time.monotonic()
        if self.path is not None and now - self._looked >= 1.0:
            self._looked = now
            try:
                mtime = self.path.stat().st_mtime
                if mtime != self._mtime:
                    self._mtime = mtime
                    self._value = self._parse(self.path.read_text(encoding="utf-8"))
                    log.info("%s reloaded", self.what)
            except PROBLEMS as err:
                log.warning("%s not reloaded, the previous one stands: %s", self.what, one_line(err))
        return self._value
