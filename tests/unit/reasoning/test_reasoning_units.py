"""Reasoning pieces without a server: Gemini request building, prompts, prices, token estimates."""

from __future__ import annotations

import pytest

from services.bootstrap.errors import InvalidInput
from services.reasoning.backends.base import GenerationParams
from services.reasoning.backends.gemini import GeminiBackend
from services.reasoning.backends.openai_http import OpenAIBackend
from services.reasoning.generation import PriceTable, estimate_tokens
from services.reasoning.prompts import Turn, chat_messages, reason_schema


def test_gemini_request_maps_roles_system_and_schema():
    messages = [{"role": "system", "content": "도우미"}, {"role": "user", "content": "질문"},
                {"role": "assistant", "content": "답"}, {"role": "user", "content": "다음"}]
    schema = reason_schema()
    contents, config = GeminiBackend.request(messages, GenerationParams(64, 0.2, schema, timeout_s=3))
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert [c.parts[0].text for c in contents] == ["질문", "답", "다음"]
    assert config.system_instruction == "도우미" and config.max_output_tokens == 64
    assert config.response_mime_type == "application/json" and config.response_json_schema == schema
    assert config.http_options.timeout == 3000


def test_openai_body_schema_formats():
    schema = {"type": "object"}
    llama = OpenAIBackend("l", "http://127.0.0.1:1/v1", "m", schema_format="json_object")
    vllm = OpenAIBackend("v", "http://127.0.0.1:1/v1", "m", schema_format="json_schema")
    params = GenerationParams(8, 0.0, schema)
    assert llama.body([], params)["response_format"] == {"type": "json_object", "schema": schema}
    assert vllm.body([], params)["response_format"]["json_schema"]["schema"] == schema
    assert "response_format" not in llama.body([], GenerationParams(8, 0.0))


def test_a_reproducible_request_to_llama_cpp_reads_its_prompt_afresh():
    llama = OpenAIBackend("l", "http://127.0.0.1:1/v1", "m", fresh_prompt=True)
    assert llama.body([], GenerationParams(8, 0.0, seed=7, fresh_prompt=True))["cache_prompt"] is False
    assert "cache_prompt" not in llama.body([], GenerationParams(8, 0.0, seed=7))  # not asked: the cache stays
    other = OpenAIBackend("v", "http://127.0.0.1:1/v1", "m")  # a server that may refuse unknown fields
    assert "cache_prompt" not in other.body([], GenerationParams(8, 0.0, seed=7, fresh_prompt=True))


def test_chat_messages_keep_order_and_refuse_instead_of_trimming():
    history = [Turn("user", "가"), Turn("assistant", "나")]
    msgs = chat_messages("시스템", history, "다", max_history_tokens=100)
    assert [m["content"] for m in msgs] == ["시스템", "가", "나", "다"]
    with pytest.raises(InvalidInput) as info:
        chat_messages("시스템", [Turn("user", "가" * 200)], "다", max_history_tokens=100)
    assert info.value.violations[0].field == "history"


def test_prices_and_estimates():
    assert PriceTable('{"paid": [2.0, 8.0]}').cost("paid", 1_000_000, 500_000) == pytest.approx(6.0)
    assert PriceTable().cost("local", 10, 10) == 0.0
    assert estimate_tokens([{"role": "user", "content": "안녕하세요"}]) == 9
