"""The one error every process runtime raises at start-up."""

from __future__ import annotations


class StartupError(Exception):
    """A process cannot start (a bad setting, a taken port, missing files): one line naming the fix."""
