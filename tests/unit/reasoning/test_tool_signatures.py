"""Tool parameters as a signature in the prompt (services/reasoning/signatures.py)."""

from __future__ import annotations

from services.reasoning.completions import ToolSpec, tool_instructions
from services.reasoning.signatures import has_numbers, signature

ORDER = {"type": "object", "additionalProperties": False, "required": ["item", "amount"],
         "properties": {"item": {"type": "string", "minLength": 1, "maxLength": 80, "description": "what to buy"},
                        "amount": {"type": "integer", "minimum": 0},
                        "currency": {"type": "string", "enum": ["KRW", "USD"], "default": "KRW"},
                        "when": {"type": ["string", "null"], "format": "date"},
                        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
                        "lines": {"type": "array", "items": {"type": "object", "required": ["sku"],
                                                             "properties": {"sku": {"type": "string"},
                                                                            "qty": {"type": "integer"}}}}}}


def test_a_signature_names_every_argument_its_type_and_whether_it_may_be_left_out() -> None:
    assert signature(ORDER) == ('{item: string (what to buy), amount: integer (0..), currency?: "KRW"|"USD" '
                                '(default "KRW"), when?: string|null (date), tags?: string[], '
                                'lines?: {sku: string, qty?: integer}[]}')
    assert signature({"anyOf": [{"type": "string"}, {"const": 3}]}) == "string|3"
    assert signature({"type": "array", "items": {"enum": ["a", "b"]}}) == '("a"|"b")[]'


def test_the_amounts_note_comes_only_with_a_number_argument() -> None:
    assert has_numbers(ORDER)
    search = {"type": "object", "properties": {"query": {"type": "string"}}}
    assert not has_numbers(search)
    with_amount = tool_instructions({"order": ToolSpec("order", "주문합니다.", ORDER)}, "auto")
    assert "Korean amounts" in with_amount and "- order{item: string (what to buy)" in with_amount
    without = tool_instructions({"search": ToolSpec("search", "찾습니다.", search)}, "required")
    assert "Korean amounts" not in without and "- search{query?: string}: 찾습니다." in without
    assert "maxLength" not in with_amount  # bounds are the grammar's, not the prompt's
