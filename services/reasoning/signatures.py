"""Tool parameters as the model reads them: a short signature instead of the JSON Schema (issue 63).

The grammar built from the schema already holds the model to every bound (lengths, counts, extra
keys), so the prompt need not spell them out; what the model needs is each argument's name, type,
whether it may be left out, its allowed values and its description. ``{resume: string (the résumé
as text), posting: string}`` reads the same as the 96-token schema in a third of the tokens
(bench/results/llm_tokens.md).
"""

from __future__ import annotations

import json
from typing import Any


def _value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def signature(schema: Any) -> str:
    """A JSON Schema in a TypeScript-like form: ``{a: string, b?: integer (1..10)[]}``, enums as ``"x"|"y"``."""
    if not isinstance(schema, dict):
        return "any"
    if "const" in schema:
        return _value(schema["const"])
    if "enum" in schema:
        out = "|".join(_value(v) for v in schema["enum"])
    elif any(k in schema for k in ("anyOf", "oneOf")):
        out = "|".join(signature(v) for v in schema.get("anyOf") or schema.get("oneOf") or [])
    else:
        kind = schema.get("type")
        if kind == "object" or "properties" in schema:
            required = set(schema.get("required") or [])
            out = "{" + ", ".join(f"{name}{'' if name in required else '?'}: {signature(sub)}"
                                  for name, sub in (schema.get("properties") or {}).items()) + "}"
        elif kind == "array":
            item = signature(schema.get("items") or {})
            out = f"({item})[]" if "|" in item or " (" in item else f"{item}[]"
        elif isinstance(kind, list):
            out = "|".join(str(k) for k in kind)
        else:
            out = str(kind or "any")
    notes: list[str] = []
    if "format" in schema:
        notes.append(str(schema["format"]))
    if "minimum" in schema or "maximum" in schema:
        notes.append(f"{schema.get('minimum', '')}..{schema.get('maximum', '')}")
    if schema.get("description"):
        notes.append(str(schema["description"]))
    if "default" in schema:
        notes.append(f"default {_value(schema['default'])}")
    return out + (f" ({'; '.join(notes)})" if notes else "")


def has_numbers(schema: Any) -> bool:
    """Whether any value the schema allows is a number (the Korean-amounts note is for those)."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if "number" in kinds or "integer" in kinds:
            return True
        return any(has_numbers(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_numbers(v) for v in schema)
    return False
