"""Every regular expression in the services and the gateway stays linear on generated worst cases (issue 75).

The patterns are collected, not listed: every compiled pattern a module holds (module level or on a
class) and every literal pattern passed to ``re.*`` in the source. Each is run on inputs built from its
own structure (``support.redos``: a witness of each repetition's body, pumped, then a failing ending),
at sizes up to 16k characters; a pattern whose time grows more than 10x for 4x the text, or that takes
over 0.5 s on one call, fails with the input that showed it. A 281-byte HTML upload stalled the OCR
service for hours through such a pattern (``(?:<!--.*?-->\\s*)*`` then a failing tag test).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from support import redos

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "gateway", "clients")
RE_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if ".modelbuild" in info.name or info.name.endswith("__main__"):
                continue
            names.append(info.name)
    return names


def _literal_patterns(path: Path, module) -> list[tuple[str, int]]:
    """(pattern, flags) of every ``re.<call>(pattern, ...)`` in a source file whose pattern is a literal or a
    module-level string (``re.search(REFUSAL, clause)``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RE_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str | bytes):
            out.append((arg.value, 0))
        elif isinstance(arg, ast.Name) and isinstance(getattr(module, arg.id, None), str):
            out.append((getattr(module, arg.id), 0))
    return out


def collect() -> dict[str, re.Pattern]:
    """Every pattern of the packages, keyed ``module:name`` (or ``module:line-literal``)."""
    found: dict[str, re.Pattern] = {}
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional engine (tritonclient, ...) not installed here
            continue
        for attr, value in vars(module).items():
            holders = [(attr, value)]
            if isinstance(value, type) and value.__module__ == name:
                holders = list(vars(value).items())
            for key, obj in holders:
                if isinstance(obj, re.Pattern):
                    found.setdefault(f"{name}:{key}", obj)
        source = getattr(module, "__file__", None)
        if source:
            for k, (pattern, flags) in enumerate(_literal_patterns(Path(source), module)):
                found.setdefault(f"{name}:literal{k}", re.compile(pattern, flags))
    return found


PATTERNS = collect()
# Patterns the code only ever applies with ``match``/``fullmatch`` at one position (timed that way), or to a
# window of a few characters (``dates._before``: 10), where a search's rescan of a run cannot happen.
ANCHORED = {"services.runtime.korean.amounts:_TAIL", "services.runtime.korean.amounts:literal1",
            "services.runtime.korean.dates:_RANGE_SPLIT", "services.runtime.korean.dates:_WEEKDAY_PAREN",
            "services.runtime.korean.dates:_DATE_TIME_GAP", "services.reasoning.completer:CHOICE",
            "services.ocr.pii.recognizers:_TITLE_NAME", "services.runtime.korean.dates:_QUANTITY_AFTER",
            "services.runtime.korean.dates:_DATE_AFTER"}
WINDOWED = {f"services.runtime.korean.dates:{name}" for name in
            ("_DAY_ONLY_BEFORE", "_WEEK_BEFORE", "_WEEKEND_BEFORE", "_MONTH_EDGE_BEFORE", "_MER_BEFORE")}


def test_the_collection_finds_the_patterns_it_must():
    assert len(PATTERNS) > 100
    assert "services.ocr.files:HTML_START" in PATTERNS
    assert any(key.startswith("gateway.conversations.reading:") for key in PATTERNS)


def test_the_generator_finds_the_known_bad_shapes():
    """The harness itself: the shape that stalled the OCR service, nested repeats, a rescanning search."""
    old_html = re.compile(rb"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b", re.I | re.S)
    for bad in (old_html, re.compile(r"(a+)+b"), re.compile(r"\d+x"), re.compile(r"([가-힣]+\s?)+$")):
        assert redos.check(bad), bad.pattern


def test_the_usage_lists_name_patterns_that_exist():
    assert (ANCHORED | WINDOWED) <= set(PATTERNS)


@pytest.mark.parametrize("key", sorted(set(PATTERNS) - WINDOWED))
def test_pattern_is_linear_on_generated_worst_cases(key):
    pattern = PATTERNS[key]
    anchored = key in ANCHORED or any(PATTERNS[a].pattern == pattern.pattern for a in ANCHORED)
    findings = redos.check(pattern, anchored=anchored)
    assert not findings, f"{key}: {findings[0]}"
