"""The contract rules: the committed snapshot is the served spec; released operations may not change.

``gateway/openapi.json`` is the spec the gateway serves, byte for byte (``make openapi`` rewrites it; a
test and ``make check`` compare). ``gateway/releases/openapi-<version>.json`` is the last release's: the
breaking-change check compares the served spec with it, so additions land with the snapshot updated
and a change to a released operation fails. A release copies the snapshot there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
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


def _same(node: Any) -> str:
    return json.dumps(node, sort_keys=True)


FIELD_PROSE = ("title", "description", "examples")


def _nullable_widening(old: Any, new: Any) -> bool:
    """Whether ``new`` is ``old`` or null (``anyOf: [old, null]``), prose aside: every old request still valid."""
    if not (isinstance(old, dict) and isinstance(new, dict) and "anyOf" in new):
        return False
    core = {k: v for k, v in old.items() if k not in FIELD_PROSE}
    if any(k not in (*FIELD_PROSE, "anyOf", "default") for k in new) or new.get("default", None) is not None:
        return False
    return sorted(map(_same, new["anyOf"])) == sorted(map(_same, [core, {"type": "null"}]))


def compatible_schema(old: Any, new: Any, request_only: bool = False) -> bool:
    """Whether ``new`` only adds to ``old``: new *optional* properties; nothing else may differ.

    A new optional request field is ignored by old clients' requests (they never send it) and a new
    response field is ignored by old clients (they never read it); a new required field, a removed or
    changed field, or any other change breaks someone. A schema only requests use (``request_only``)
    may also relax: a required field becomes optional, or a field also takes null (an old client's
    every request is still accepted; a response may never relax, its readers rely on the field).
    """
    if _same(old) == _same(new):
        return True
    if not (isinstance(old, dict) and isinstance(new, dict) and "properties" in old and "properties" in new):
        return False
    skip = ("properties", "required") if request_only else ("properties",)
    rest = {k: v for k, v in old.items() if k not in skip}
    if _same(rest) != _same({k: v for k, v in new.items() if k not in skip}):
        return False  # title, type, required, additionalProperties, description: all unchanged
    if request_only and not set(new.get("required", [])) <= set(old.get("required", [])):
        return False  # a newly required field refuses old requests
    return all(name in new["properties"] and (
        _same(prop) == _same(new["properties"][name])
        or (request_only and _nullable_widening(prop, new["properties"][name])))
        for name, prop in old["properties"].items())


# An operation's prose: what a reader is told, not what a client sends or receives.
PROSE = ("summary", "description")


def _contract(op: dict) -> str:
    """An operation without its prose (a better description breaks no client)."""
    return json.dumps({k: v for k, v in op.items() if k not in PROSE}, sort_keys=True)


def _documented_since(now: dict, old: dict) -> dict:
    """``now`` less what documents a released operation better without changing it.

    A response's new description, and per-event schemas (``x-itemSchema``) added to a stream the release
    described as text. Once released, those are compared as everything else is.
    """
    out = copy.deepcopy(now)
    for code, answer in out.get("responses", {}).items():
        before = old.get("responses", {}).get(code, {})
        if "description" in answer and "description" in before:
            answer["description"] = before["description"]
        for kind, media in answer.get("content", {}).items():
            if isinstance(media, dict) and "x-itemSchema" in media \
                    and "x-itemSchema" not in before.get("content", {}).get(kind, {}):
                del media["x-itemSchema"]
    return out


def changed_operations(snapshot: dict, spec: dict) -> list[str]:
    """Every snapshot operation missing or different now, and every schema they use that changed.

    New operations, new schemas and new optional properties are allowed (the contract grows), and so
    is new prose on an operation (its summary and description); nothing else existing may change.
    """
    problems = []
    used: set[str] = set()
    answered: set[str] = set()  # schemas a response (or a parameter) uses: never relaxed
    for path, ops in snapshot.get("paths", {}).items():
        for method, op in ops.items():
            now = spec.get("paths", {}).get(path, {}).get(method)
            if now is None:
                problems.append(f"removed: {method.upper()} {path}")
            elif _contract(_documented_since(now, op)) != _contract(op):
                problems.append(f"changed: {method.upper()} {path}")
            _refs(op, used)
            _refs({k: v for k, v in op.items() if k != "requestBody"}, answered)
    old_schemas = snapshot.get("components", {}).get("schemas", {})
    new_schemas = spec.get("components", {}).get("schemas", {})
    request_only = _closure(snapshot, used) - _closure(snapshot, answered)
    for name in sorted(_closure(snapshot, used)):
        if not compatible_schema(old_schemas.get(name), new_schemas.get(name), name in request_only):
            problems.append(f"schema changed: {name}")
    return problems


HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "openapi.json"
RELEASE = HERE / "releases" / "openapi-1.0.0.json"


def canonical(spec: dict) -> str:
    """The spec as the snapshot file holds it (sorted keys, two-space indent, UTF-8, a final newline)."""
    return json.dumps(spec, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def released() -> dict:
    """The last release's spec (what the breaking-change check and the 422 rule compare with)."""
    return json.loads(RELEASE.read_text())


def without_unsent_422(spec: dict, snapshot: dict) -> dict:
    """``spec`` without the 422 FastAPI documents on every operation with parameters.

    The gateway never answers 422 (schema violations are 400 with the fields named); operations released
    with a 422 in contract v1.0.0 keep theirs unchanged (the contract forbids changing them), every other
    operation documents only what it sends.
    """
    frozen = snapshot.get("paths", {})
    for path, ops in spec.get("paths", {}).items():
        for method, op in ops.items():
            if "422" not in frozen.get(path, {}).get(method, {}).get("responses", {}):
                op.get("responses", {}).pop("422", None)
    return spec
