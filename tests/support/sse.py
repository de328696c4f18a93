"""Server-sent events checked against the spec the gateway serves: every event received must be declared.

Each streaming operation of ``gateway/openapi.json`` (kept equal to the served spec by the snapshot test)
describes one event in ``x-itemSchema`` (OpenAPI 3.2's ``itemSchema`` shape): ``{event, data}`` variants
whose ``data`` is JSON with a ``contentSchema``, or a literal line. :func:`checked_events` parses a whole
response body and fails on an event name the operation does not declare, and on data its schema refuses —
a field the schema does not name included (objects are read as closed here, unless the schema leaves them
open on purpose: ``additionalProperties`` set, as a ``dict[str, Any]`` payload is).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from gateway.http.streams import ITEM_SCHEMA, parse

SPEC_FILE = Path(__file__).resolve().parents[2] / "gateway" / "openapi.json"
SEEN: set[tuple[str, str, str]] = set()  # (method, path template, event) checked in this test session


@functools.cache
def spec() -> dict[str, Any]:
    """The gateway's spec, with objects closed (see the module's docstring)."""
    return _closed(json.loads(SPEC_FILE.read_text(encoding="utf-8")))


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _closed(v) for k, v in node.items()}
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node \
                and node.get("type", "object") == "object":
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(v) for v in node]
    return node


def item_schema(method: str, path: str) -> dict[str, Any]:
    """The per-event schema of the streaming operation serving ``method path`` (a concrete path)."""
    return spec()["paths"][template_of(method, path)][method.lower()]["responses"]["200"]["content"][
        "text/event-stream"][ITEM_SCHEMA]


def template_of(method: str, path: str) -> str:
    """The spec's path template of the streaming operation serving ``method path``."""
    for template, ops in spec()["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/:]+", re.escape(template)) + "$"
        op = ops.get(method.lower())
        if op is not None and re.match(pattern, path):
            content = op["responses"]["200"]["content"].get("text/event-stream")
            assert content is not None and ITEM_SCHEMA in content, f"{method} {template} describes no event stream"
            return template
    raise AssertionError(f"no operation of the spec serves {method} {path}")


@functools.cache
def _validator(ref: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": ref, "components": spec()["components"]})


def check(method: str, path: str, event: str, data: str) -> Any:
    """``data`` of ``event`` parsed, after checking both against the operation's spec (AssertionError else)."""
    variants = [v for v in item_schema(method, path)["oneOf"] if v["properties"]["event"]["const"] == event]
    assert variants, f"{method} {path} sent event {event!r}, which its spec does not declare"
    SEEN.add((method.upper(), template_of(method, path), event))
    failures = []
    for variant in variants:
        schema = variant["properties"]["data"]
        if "const" in schema:
            if data == schema["const"]:
                return data
            failures.append(f"not {schema['const']!r}")
            continue
        try:
            value = json.loads(data)
        except json.JSONDecodeError as err:
            failures.append(f"not JSON ({err})")
            continue
        errors = sorted(_validator(schema["contentSchema"]["$ref"]).iter_errors(value), key=str)
        if not errors:
            return value
        failures.append("; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                                  for e in errors[:3]))
    raise AssertionError(f"{method} {path} event {event!r} does not match its spec: {' | '.join(failures)}\n"
                         f"data: {data[:500]}")


def checked_events(response: httpx.Response) -> list[tuple[str, Any]]:
    """A whole event-stream response as (event, data) pairs, every event checked against the spec."""
    request = response.request
    return [(event, check(request.method, request.url.path, event, data)) for event, data in parse(response.text)]


def unseen() -> list[str]:
    """Declared events no test of this session received (shown after the run: what the suite never sends)."""
    out = []
    for template, ops in spec()["paths"].items():
        for method, op in ops.items():
            item = op.get("responses", {}).get("200", {}).get("content", {}).get("text/event-stream", {})
            for variant in item.get(ITEM_SCHEMA, {}).get("oneOf", []):
                event = variant["properties"]["event"]["const"]
                if (method.upper(), template, event) not in SEEN:
                    out.append(f"{method.upper()} {template}: {event}")
    return sorted(set(out))
