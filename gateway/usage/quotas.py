"""Quotas per API key, from a file the operator edits (reloaded without a restart).

The file (``--quotas-file``, YAML or JSON)::

    default: {tokens_per_day: 200000}            # every key not listed (0 or absent: no limit)
    keys:
      k-3f2a9c01d4e5:                            # a key's id (gateway/usage/keys.py)
        tokens_per_day: 50000
        tokens_per_month: 1000000
        cost_per_month_usd: 20                   # priced backends only (a local model costs 0)
        soft: 0.8                                # log and count from 80 % of a limit (default 0.8)

Days and months are UTC. The file is read again when its modification time changes (looked at once a
second at most); a file that does not parse keeps the quotas before it, logged once per change.
"""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gateway.usage.ledger import Period
from gateway.watched_file import WatchedFile


class QuotaFileError(ValueError):
    """The quotas file at start-up does not parse (one line naming the file and what is wrong)."""


class Quota(BaseModel):
    """One key's limits (0: none)."""

    model_config = ConfigDict(extra="forbid")
    tokens_per_day: int = Field(0, ge=0)
    tokens_per_month: int = Field(0, ge=0)
    cost_per_day_usd: float = Field(0.0, ge=0)
    cost_per_month_usd: float = Field(0.0, ge=0)
    soft: float = Field(0.8, gt=0, le=1, description="share of a limit from which use is logged and counted")

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return bool(self.tokens_per_day or self.tokens_per_month or self.cost_per_day_usd or self.cost_per_month_usd)


class QuotaFile(BaseModel):
    """The file's fields."""

    model_config = ConfigDict(extra="forbid")
    default: Quota = Field(default_factory=Quota)
    keys: dict[str, Quota] = Field(default_factory=dict)


@dataclass(frozen=True)
class Window:
    """A quota period of one key: its ledger entry, the names of its limits and when it ends."""

    period: Period
    name: str  # "day" or "month"
    ends_unix: float


def windows(key_id: str, quota: Quota, now: float) -> list[Window]:
    """The day and month periods a request of ``key_id`` counts against (only those with a limit)."""
    t = time.gmtime(now)
    day_end = calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0)) + 86400
    month_days = calendar.monthrange(t.tm_year, t.tm_mon)[1]
    month_end = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) + month_days * 86400
    out = []
    if quota.tokens_per_day or quota.cost_per_day_usd:
        out.append(Window(Period(f"quota:{key_id}:d:{time.strftime('%Y%m%d', t)}", quota.tokens_per_day,
                                 round(quota.cost_per_day_usd * 1e6), int(day_end - now) + 3600), "day", day_end))
    if quota.tokens_per_month or quota.cost_per_month_usd:
        out.append(Window(Period(f"quota:{key_id}:m:{time.strftime('%Y%m', t)}", quota.tokens_per_month,
                                 round(quota.cost_per_month_usd * 1e6), int(month_end - now) + 3600), "month",
                          month_end))
    return out


class Quotas:
    """The quota file, read again when it changes (gateway/watched_file.py)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file = WatchedFile(path, self._parse, QuotaFile(), "quotas file", QuotaFileError)

    @staticmethod
    def _parse(text: str) -> QuotaFile:
        raw: Any = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
        return QuotaFile.model_validate(raw or {})

    def of(self, key_id: str) -> Quota:
        """The quota of a key (the file's default when the key is not listed)."""
        file = self._file.value
        return file.keys.get(key_id, file.default)
