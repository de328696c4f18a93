"""The frozen-contract rule: existing operations (and the schemas they use) may not change."""

from __future__ import annotations

import json
from typing import Any


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for v in node.values():
            _refs(v, found)
    elif isinstance(node, list):
        for v in node:
            _refs(v, found)


def _closure(spec: dict, names: set[str]) -> set[str]:
    schemas = spec.get("components", {}).get("schemas", {})
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        more: set[str] = set()
        _refs(schemas[name], more)
        todo += list(more - seen)
    return seen


def changed_operations(snapshot: dict, spec: dict) -> list[str]:
    """Every snapshot operation missing or different now, and every schema they use that changed.

    New operations and new schemas are allowed (the contract grows); nothing existing may change.
    """
    problems = []
    used: set[str] = set()
    for path, ops in snapshot.get("paths", {}).items():
        for method, op in ops.items():
            now = spec.get("paths", {}).get(path, {}).get(method)
            if now is None:
                problems.append(f"removed: {method.upper()} {path}")
            elif json.dumps(now, sort_keys=True) != json.dumps(op, sort_keys=True):
                problems.append(f"changed: {method.upper()} {path}")
            _refs(op, used)
    old_schemas = snapshot.get("components", {}).get("schemas", {})
    new_schemas = spec.get("components", {}).get("schemas", {})
    for name in sorted(_closure(snapshot, used)):
        if json.dumps(old_schemas.get(name), sort_keys=True) != json.dumps(new_schemas.get(name), sort_keys=True):
            problems.append(f"schema changed: {name}")
    return problems
