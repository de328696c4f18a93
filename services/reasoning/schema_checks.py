"""Schemas a caller sends, checked before any decoding: JSON, a valid schema, and a bounded grammar.

A response format or a tool's parameters become the grammar the model decodes under; a schema that is
not one, or that would make an unbounded grammar (depth, enum size, lengths, patterns: the ``MAX_*``
ceilings), is refused with the violations named, before any model call. :func:`validate` checks a value
against a schema once decoded.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from services.bootstrap.errors import Violation
from services.reasoning.schema_patterns import LinearValidator, pattern_violations


class AnswerInvalid(ValueError):
    """The model's structured answer does not parse or does not follow its schema."""


def parse_json(text: str) -> Any:
    """``text`` as JSON (raises :class:`AnswerInvalid`)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise AnswerInvalid(f"not JSON: {str(err).splitlines()[0][:200]}") from None


def validate(value: Any, schema: dict[str, Any], what: str) -> None:
    """Raise :class:`AnswerInvalid` naming the first violation when ``value`` breaks ``schema``."""
    try:
        jsonschema.validate(value, schema, cls=LinearValidator)  # the caller's patterns on RE2: linear time
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path)
        raise AnswerInvalid(f"{what}{' at ' + where if where else ''}: {err.message[:200]}") from None
    except RecursionError:
        raise AnswerInvalid(f"{what} is nested too deep") from None


def check_schema(raw: str, where: str, violations: list[Violation], *, object_only: bool = False
                 ) -> dict[str, Any] | None:
    """A caller's JSON schema, parsed and checked (a violation naming ``where`` otherwise).

    Only a schema every backend can be sent passes: NaN or Infinity (which JSON has not) and lone
    surrogates (which no UTF-8 encoder takes) are refused here rather than failing the backend call.
    """
    try:
        schema = json.loads(raw, parse_constant=_no_constant)
        if not isinstance(schema, dict):
            raise ValueError("a schema must be a JSON object")
        json.dumps(schema, ensure_ascii=False).encode("utf-8")
        jsonschema.Draft202012Validator.check_schema(schema)
    except UnicodeEncodeError:
        violations.append(Violation(where, "must be valid Unicode text (no lone surrogate code points)"))
        return None
    except (ValueError, RecursionError, jsonschema.SchemaError) as err:
        violations.append(Violation(where, f"not a valid JSON schema: {str(err).splitlines()[0][:200]}"))
        return None
    if object_only and schema.get("type", "object") != "object":
        violations.append(Violation(where, "must describe an object (type: object)"))
        return None
    bounds = grammar_violations(schema, where) + pattern_violations(schema, where)
    if bounds:
        violations += bounds
        return None
    return schema


# A caller's schema becomes a grammar the backend compiles and checks at every token: its size grows
# with enums, repetition counts and string lengths, and a large one held the only LLM slot for 20 s
# (an enum of 20,000 values) or failed the backend's sampler (minItems 5,000). Bounds checked here,
# before any backend sees the schema; generous for real response formats and tool parameters.
MAX_SCHEMA_CHARS = 16_000  # the schema as JSON
MAX_SCHEMA_DEPTH = 12  # nested objects/arrays in the schema document
MAX_ENUM = 256  # values of one enum
MAX_PROPERTIES = 128  # properties of one object schema
MAX_MIN_ITEMS, MAX_MAX_ITEMS = 64, 1024  # an array's minItems / maxItems
MAX_MIN_LENGTH, MAX_MAX_LENGTH = 1_000, 20_000  # a string's minLength / maxLength
MAX_MIN_PROPERTIES = 64
MAX_PATTERN = 256  # characters of one pattern


def grammar_violations(schema: dict[str, Any], where: str) -> list[Violation]:
    """Every place ``schema`` passes a grammar bound, named by its path (``where.properties.x.enum``)."""
    out: list[Violation] = []
    size = len(json.dumps(schema, ensure_ascii=False))
    if size > MAX_SCHEMA_CHARS:
        out.append(Violation(where, f"the schema is {size:,} characters as JSON; at most {MAX_SCHEMA_CHARS:,}"))
    caps = {"minItems": MAX_MIN_ITEMS, "maxItems": MAX_MAX_ITEMS, "minLength": MAX_MIN_LENGTH,
            "maxLength": MAX_MAX_LENGTH, "minProperties": MAX_MIN_PROPERTIES, "maxProperties": MAX_PROPERTIES,
            "minContains": MAX_MIN_ITEMS, "maxContains": MAX_MAX_ITEMS}

    def walk(node: Any, path: str, depth: int) -> None:
        if len(out) >= 20:
            return
        if depth > MAX_SCHEMA_DEPTH:
            out.append(Violation(path, f"nested deeper than {MAX_SCHEMA_DEPTH} levels"))
            return
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", depth + 1)
            return
        if not isinstance(node, dict):
            return
        for key, cap in caps.items():
            value = node.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > cap:
                out.append(Violation(f"{path}.{key}", f"at most {cap} ({value:g} given)"))
        enum = node.get("enum")
        if isinstance(enum, list) and len(enum) > MAX_ENUM:
            out.append(Violation(f"{path}.enum", f"at most {MAX_ENUM} values ({len(enum):,} given)"))
        props = node.get("properties")
        if isinstance(props, dict) and len(props) > MAX_PROPERTIES:
            out.append(Violation(f"{path}.properties", f"at most {MAX_PROPERTIES} properties ({len(props)} given)"))
        pattern = node.get("pattern")
        if isinstance(pattern, str) and len(pattern) > MAX_PATTERN:
            out.append(Violation(f"{path}.pattern", f"at most {MAX_PATTERN} characters"))
        for key, value in node.items():
            if key not in ("enum", "const", "examples", "default") and isinstance(value, dict | list):
                walk(value, f"{path}.{key}", depth + 1)

    walk(schema, where, 0)
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
