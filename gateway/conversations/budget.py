"""The budget a turn sets, read by grammar from its amounts.

One amount (services/runtime/korean/amounts.py) sets the side its word names, two are a range, and a
later amount that revises an earlier one (5만 원이었는데 8만 원까지 늘릴게) replaces it.
"""

from __future__ import annotations

import re
from typing import Any

from services.runtime.korean.amounts import amounts

# A later amount that revises the one before it, by grammar: the first told as past or denied (5만 원이었는데,
# 5만 원 말고, 5만 원이 아니라), or the second as where the budget moves to (8만 원으로 늘릴게, 올려서, 바꿀게).
_WAS = re.compile(r"^\s*+(?:이었|였|이던|이라고\s*했|라고\s*했|생각했|잡았|했)[가-힣]*"
                  r"|^\s*+(?:말고|아니[고라다]|이\s*아니|대신)")
_TO = re.compile(r"^\s*+(?:까지|으?로)?\s*+(?:늘|올|줄이|줄여|줄일|낮|내리|내려|바꾸|바꿀|바꿔|변경|조정|상향|하향)")


def revises(text: str, first: Any, second: Any) -> bool:
    """Whether the amount ``second`` replaces ``first`` (a correction) rather than closing a range with it."""
    between = text[first.end:second.start]
    return bool(_WAS.match(between) or _TO.match(text[second.end:]) and "사이" not in text[second.end:])


def _without_amounts(text: str) -> str:
    """``text`` with every amount, and a correction word right after it (말고, 아니라), blanked (same length)."""
    out = text
    for a in amounts(text):
        end = a.end
        m = re.match(r"^\s*+(?:이|가|은|는)?\s*+(?:말고|아니라|아니고|대신)", text[end:])
        if m:
            end += m.end()
        out = out[:a.start] + " " * (end - a.start) + out[end:]
    return out


def budget(text: str, profile: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """The budget after ``text`` (None: the turn names no amount in won)."""
    found = [a for a in amounts(text) if a.currency in (None, "KRW") and a.integer is not None and a.integer > 0]
    if not found:
        return None
    low, high = profile["budget_min"], profile["budget_max"]
    if len(found) >= 2 and revises(text, found[0], found[1]):
        found = found[1:]  # "5만 원이었는데 8만 원까지 늘릴게": the later amount alone, setting its side
    elif len(found) >= 2:
        values = sorted(a.integer for a in found[:2] if a.integer is not None)
        return values[0], values[-1]
    one = found[0]
    if one.bound == "range" and one.high is not None:
        return one.integer, int(one.high)
    if one.bound == "min":
        low = one.integer
        if high is not None and low is not None and high < low:
            high = None
    else:
        high = one.integer
        if low is not None and high is not None and low > high:
            low = None
    return low, high
