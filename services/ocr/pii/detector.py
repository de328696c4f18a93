"""Personal data in Korean text: every recognizer run, overlaps resolved, the spans masked on request.

:func:`detect` runs the recognizers of the kinds asked for (recognizers.py) on the text and on its
digit view, keeps the spans at or above ``threshold``, and resolves overlaps: the higher score
wins, then the longer span (a resident number is not also a bank account; an address that holds
a district name is one span). :func:`mask` replaces each span's characters with ``*``; a
``keep`` policy shows the part a human needs to recognise the value without revealing it (the
first three digits of a phone number, the birth date and gender digit of a resident number, the
surname of a name, the first character and the domain of an e-mail).

Nothing here logs or records the text or what was found: callers get the spans, and only counts
leave the process (metrics, spans' attributes).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from services.ocr.pii.recognizers import KINDS, RECOGNIZERS, Span, digit_view, phones

DEFAULT_THRESHOLD = 0.5
MAX_TEXT_CHARS = 200_000  # a request's text at most (a 100-page résumé is ~150,000 characters)
# Which recognizer finds which kinds (a recognizer may find two: resident and alien numbers, URLs and handles).
PRODUCES = {"resident_number": ("resident_number", "alien_number"), "url": ("url", "handle")}


@dataclass(frozen=True)
class Policy:
    """What to find and how to show it.

    ``company_lines``: a landline marked as a company's (대표, 팩스, 고객센터) and 15xx numbers are
    found too (by default they are not personal data). ``keep``: mask partially (see the module doc).
    """

    kinds: tuple[str, ...] = KINDS
    threshold: float = DEFAULT_THRESHOLD
    company_lines: bool = False
    keep: bool = False


def detect(text: str, policy: Policy | None = None) -> list[Span]:
    """The personal data in ``text``, in order, overlaps resolved."""
    policy = policy or Policy()
    wanted = set(policy.kinds)
    view = digit_view(text)
    found: list[Span] = []
    for name, recognize in RECOGNIZERS.items():
        if not wanted & set(PRODUCES.get(name, (name,))):
            continue
        spans = phones(text, view, policy.company_lines) if name == "phone" else recognize(text, view)
        found += [s for s in spans if s.kind in wanted and s.score >= policy.threshold]
    return resolve(found)


def resolve(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans: the higher score first, then the longer, then the earlier.

    Sort and sweep: the kept spans never overlap, so each candidate is checked against its two
    neighbours among them (bisect), O(n log n) however many spans a long text yields.
    """
    starts: list[int] = []
    kept: list[Span] = []
    for s in sorted(spans, key=lambda s: (-s.score, -(s.end - s.start), s.start)):
        i = bisect.bisect_right(starts, s.start)
        if i > 0 and kept[i - 1].end > s.start:
            continue
        if i < len(kept) and kept[i].start < s.end:
            continue
        starts.insert(i, s.start)
        kept.insert(i, s)
    return kept


def _masked(value: str, kind: str, keep: bool) -> str:
    stars = re.sub(r"[^\s\-.@]", "*", value) if kind in ("phone", "card", "bank_account", "resident_number",
                                                        "alien_number", "driver_license", "birth_date") else \
        re.sub(r"\S", "*", value)
    if not keep:
        return stars
    if kind == "phone":
        digits = 0
        out = []
        for ch, star in zip(value, stars, strict=True):
            if ch.isdigit() and digits < 3:
                out.append(ch)
                digits += 1
            else:
                out.append(star)
        return "".join(out)
    if kind in ("resident_number", "alien_number"):
        m = re.match(r"(\d{6}\s?-?\s?\d)", value)
        return m.group(1) + stars[m.end():] if m else stars
    if kind == "person":
        return value[0] + stars[1:]
    if kind == "email" and "@" in value:
        local, _, domain = value.partition("@")
        return local[0] + "*" * (len(local) - 1) + "@" + domain
    return stars


def mask(text: str, spans: list[Span], keep: bool = False) -> str:
    """``text`` with every span's characters masked (``keep``: partially, see the module doc)."""
    out, pos = [], 0
    for s in sorted(spans, key=lambda s: s.start):
        out += [text[pos:s.start], _masked(text[s.start:s.end], s.kind, keep)]
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
