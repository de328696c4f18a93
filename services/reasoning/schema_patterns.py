"""JSON Schema validation whose regular expressions cost linear time: a caller's ``pattern`` runs on RE2.

A caller's schema (``response_format``, tool parameters, ``options.json_schema``) may carry
``pattern`` and ``patternProperties``; jsonschema runs them with Python's backtracking ``re`` on the
model's output, where ``(a+)+$`` against 40 ``a`` characters takes hours. Here they run on RE2
(google-re2: an automaton, time linear in the text for every pattern), compiled once per pattern. A
pattern RE2 cannot run — a lookaround or a backreference, which have no linear-time algorithm — is
refused when the schema is checked, naming where it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators

from services.bootstrap.errors import Violation

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the caller's 400, not a line in the service's log


@lru_cache(maxsize=1024)
def linear(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (raises ``re2.error`` for what RE2 cannot run in linear time)."""
    return re2.compile(pattern, _OPTIONS)


def _pattern(validator, patrn: str, instance: Any, schema: dict) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not linear(patrn).search(instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator, properties: dict, instance: Any, schema: dict) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in properties.items():
        compiled = linear(patrn)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


LinearValidator = validators.extend(Draft202012Validator, {"pattern": _pattern,
                                                           "patternProperties": _pattern_properties})


def pattern_violations(schema: Any, where: str) -> list[Violation]:
    """Every ``pattern`` / ``patternProperties`` key of ``schema`` RE2 cannot compile, named by its path."""
    out: list[Violation] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")
            return
        if not isinstance(node, dict):
            return
        found = []
        if isinstance(node.get("pattern"), str):
            found.append((f"{path}.pattern", node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            found += [(f"{path}.patternProperties", p) for p in node["patternProperties"] if isinstance(p, str)]
        for at, patrn in found:
            try:
                linear(patrn)
            except re2.error as err:
                reason = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
                out.append(Violation(at, f"a pattern this service matches in linear time only (RE2 syntax: no "
                                         f"lookaround, no backreferences): {reason[:120]}"))
        for key, value in node.items():
            if key not in ("enum", "const", "examples", "default") and isinstance(value, dict | list):
                walk(value, f"{path}.{key}")

    walk(schema, where)
    return out
