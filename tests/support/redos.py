"""Generated worst cases for regular expressions: does a pattern's cost grow more than linearly?

A backtracking engine goes super-linear where a repeated part can match the same text in several ways
(``(a+)+``, ``(?:<!--.*?-->\\s*)*`` followed by a test that fails) or where an unanchored search rescans
the rest of the text from every position. The inputs that show it are built from the pattern itself:
for every repetition in the parsed pattern (``re._parser``), a string its body matches (a *witness*,
one per alternative), pumped ``n`` times after a witness of what precedes the repetition, then ended by
a character that makes the rest fail. The pattern is timed on growing ``n``; a call over
:data:`CALL_LIMIT_S` (cut by SIGALRM: the ``re`` engine checks signals) or time growing faster than
the text is a finding.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from re import _constants as sc  # type: ignore[attr-defined]
from re import _parser as sp  # type: ignore[attr-defined]

CALL_LIMIT_S = 0.5
MAX_WITNESSES = 8
ENDINGS = ("", "\x00", "!", "\n", "가")
MAX_ATTACKS = 48  # (prefix, pump) pairs tried per pattern
SIZES = (256, 1024, 4096, 16384)  # characters of the pumped part
REPEATS = (sc.MAX_REPEAT, sc.MIN_REPEAT, getattr(sc, "POSSESSIVE_REPEAT", sc.MAX_REPEAT))


@dataclass
class Finding:
    """A pattern that went super-linear on one generated input."""

    pattern: str
    prefix: str
    pump: str
    ending: str
    sizes: list[int]
    seconds: list[float]

    def __str__(self) -> str:
        times = ", ".join(f"{n}: {s * 1000:.1f} ms" for n, s in zip(self.sizes, self.seconds, strict=False))
        return f"{self.pattern[:80]!r}: {self.prefix[:20]!r} + {self.pump[:20]!r} * n + {self.ending!r} ({times})"


def _char_choices(av) -> list[str]:
    """Representative characters of a character set ``[...]`` (or a negated one)."""
    negate = any(op == sc.NEGATE for op, _ in av)
    if negate:
        banned = set()
        for op, arg in av:
            if op == sc.LITERAL:
                banned.add(chr(arg))
            elif op == sc.RANGE:
                banned.update(chr(c) for c in range(arg[0], min(arg[1], arg[0] + 512) + 1))
        return [c for c in ("a", " ", "1", "가", "-", ".", "<", "\n") if c not in banned][:3] or ["\x7f"]
    out: list[str] = []
    for op, arg in av:
        if op == sc.LITERAL:
            out.append(chr(arg))
        elif op == sc.RANGE:
            out.append(chr(arg[0]))
            if arg[1] != arg[0]:
                out.append(chr(arg[1]))
        elif op == sc.CATEGORY:
            out += {sc.CATEGORY_DIGIT: ["1"], sc.CATEGORY_SPACE: [" ", "\n"], sc.CATEGORY_WORD: ["a", "가", "1"],
                    sc.CATEGORY_NOT_DIGIT: ["a"], sc.CATEGORY_NOT_SPACE: ["a"],
                    sc.CATEGORY_NOT_WORD: [" "]}.get(arg, ["a"])
    return out[:4] or ["a"]


def witnesses(items) -> list[str]:
    """Strings a parsed (sub)pattern matches, a few alternatives each (lookarounds taken as empty)."""
    outs = [""]
    for op, av in items:
        if op == sc.LITERAL:
            choices = [chr(av)]
        elif op == sc.NOT_LITERAL:
            choices = ["a" if av != ord("a") else "b"]
        elif op == sc.ANY:
            choices = ["a", "-"]
        elif op == sc.IN:
            choices = _char_choices(av)
        elif op == sc.BRANCH:
            choices = [w for branch in av[1] for w in witnesses(branch)]
        elif op == sc.SUBPATTERN:
            choices = witnesses(av[-1])
        elif op == getattr(sc, "ATOMIC_GROUP", None):
            choices = witnesses(av)
        elif op in REPEATS:
            low, _high, body = av
            inner = witnesses(body)
            choices = [w * max(low, 1) for w in inner] + ([""] if low == 0 else [])
        else:  # AT, ASSERT, ASSERT_NOT, GROUPREF, ...: no characters of their own
            choices = [""]
        outs = [o + c for o in outs for c in choices[:MAX_WITNESSES]][:MAX_WITNESSES]
    return outs


def attacks(pattern: re.Pattern) -> Iterator[tuple[str, str]]:
    """(prefix, pump) pairs: for every repetition, what precedes it and what its body matches."""
    seen: set[tuple[str, str]] = set()

    def walk(items, before: list[str]) -> Iterator[tuple[str, str]]:
        items = list(items)
        for k, (op, av) in enumerate(items):
            prefixes = [b + w for b in before for w in witnesses(items[:k])][:4] or [""]
            if op in REPEATS:
                for w in witnesses(av[2]):
                    if w:
                        for p in prefixes:
                            yield p, w
                yield from walk(av[2], prefixes)
            elif op == sc.SUBPATTERN:
                yield from walk(av[-1], prefixes)
            elif op == getattr(sc, "ATOMIC_GROUP", None):
                yield from walk(av, prefixes)
            elif op == sc.BRANCH:
                for branch in av[1]:
                    yield from walk(branch, prefixes)
            elif op in (sc.ASSERT, sc.ASSERT_NOT):
                yield from walk(av[1], prefixes)

    for pair in walk(sp.parse(pattern.pattern, pattern.flags), [""]):
        if pair not in seen:
            seen.add(pair)
            yield pair
            if len(seen) >= MAX_ATTACKS:
                return


def _timed(pattern: re.Pattern, text: str, anchored: bool = False) -> float:
    subject: str | bytes
    def stop(*_):
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
    subject = text.encode("utf-8", "surrogatepass") if isinstance(pattern.pattern, bytes) else text
    t = time.perf_counter()
    try:
        if anchored:
            pattern.match(subject)
        else:
            pattern.search(subject)
            for _ in pattern.finditer(subject):
                pass
        return time.perf_counter() - t
    except TimeoutError:
        return float("inf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check(pattern: re.Pattern, max_ratio: float = 10.0, floor_s: float = 0.02, anchored: bool = False
          ) -> list[Finding]:
    """Findings for ``pattern``: a call over the limit, or time growing > ``max_ratio`` for 4x the text.

    Linear patterns take a few milliseconds at 16k characters and quadratic ones hundreds, so a growth
    only counts above ``floor_s``; each size is timed best of three (a busy machine adds noise, never
    removes it). ``anchored``: the pattern is only used with ``match`` at a position, so that is what is timed.
    """
    found: list[Finding] = []
    for prefix, pump in attacks(pattern):
        for ending in ENDINGS:
            sizes, seconds = [], []
            for size in SIZES:
                n = max(1, size // len(pump))
                text = prefix + pump * n + ending
                s = _timed(pattern, text, anchored)
                if s != float("inf") and size >= SIZES[-2]:
                    s = min(s, _timed(pattern, text, anchored), _timed(pattern, text, anchored))
                sizes.append(len(pump) * n)
                seconds.append(s)
                if s == float("inf"):
                    break
            last, before = seconds[-1], seconds[-2] if len(seconds) > 1 else 0.0
            if last == float("inf") or (last > floor_s and last > max_ratio * max(before, floor_s / max_ratio)):
                return [Finding(pattern.pattern, prefix, pump, ending, sizes, seconds)]
    return found
