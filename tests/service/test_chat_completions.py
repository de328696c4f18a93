"""`/v1/chat/completions` with the official `openai` client, unmodified, against the real llama.cpp server.

The gateway under uvicorn on a real port, the reasoning service on port 0 over the embedded model
(Qwen2.5-Coder-1.5B): create, stream with usage, `json_schema` through the SDK's pydantic `parse`
helper, a two-step tool round trip, errors in OpenAI's shape, and one framework client (LangChain's
`ChatOpenAI`: structured output and bound tools). Answers are short (max_tokens) so
the model's speed on two cores does not dominate; what is asserted is shape and validity, not wording.
"""

from __future__ import annotations

import json
from typing import Literal

import openai
import pytest
import pytest_asyncio
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from support.apps import gateway_app, serving
from support.servers import running_reasoning

pytestmark = pytest.mark.asyncio(loop_scope="session")
SLOW = {"reasoning_first_token_s": 120.0, "reasoning_generation_s": 120.0, "reasoning_total_s": 240.0,
        "reasoning_timeout_ms": 300000}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "도시의 현재 날씨를 알려 준다",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "도시 이름"}},
                   "required": ["city"], "additionalProperties": False}}}
BOOKS = {"type": "function", "function": {
    "name": "search_books", "description": "도서 목록에서 책을 찾는다",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


class Book(BaseModel):
    title: str
    year: int = Field(ge=1000, le=2100)
    genre: Literal["소설", "에세이", "IT", "역사"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def base_url(embedding_service, llm_server):
    async with running_reasoning(backend_url=llm_server.base_url) as reasoning:
        app = gateway_app(embedding_service.port, "127.0.0.1:1", reasoning_targets=f"127.0.0.1:{reasoning.port}",
                          **SLOW)
        async with serving(app) as base:
            yield f"{base}/v1"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def client(base_url):
    async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300) as oa:
        yield oa


async def test_create_answers_with_usage(client):
    out = await client.chat.completions.create(
        model="local", max_tokens=24, temperature=0, seed=7,
        messages=[{"role": "system", "content": "한국어로 짧게 답한다."}, {"role": "user", "content": "안녕하세요?"}])
    choice = out.choices[0]
    assert out.object == "chat.completion" and out.model == "local" and out.id.startswith("chatcmpl-")
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens


async def test_stream_sends_chunks_then_the_usage_chunk(client):
    stream = await client.chat.completions.create(
        model="local", max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "하늘은 무슨 색인가요? 한 단어로."}])
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text.strip() and finishes in (["stop"], ["length"])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)


async def test_json_schema_through_the_sdks_parse_helper(client):
    out = await client.chat.completions.parse(
        model="local", max_tokens=80, temperature=0, response_format=Book,
        messages=[{"role": "user", "content": "한강의 소설 '소년이 온다'(2014)를 제목, 출간 연도, 장르로 알려 줘."}])
    book = out.choices[0].message.parsed
    assert isinstance(book, Book) and book.title  # the SDK validated it with pydantic; the service with jsonschema


async def test_json_object_is_an_object(client):
    out = await client.chat.completions.create(
        model="local", max_tokens=60, temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "도시 이름과 인구를 JSON 객체로: 서울"}])
    assert isinstance(json.loads(out.choices[0].message.content), dict)


async def test_a_two_step_tool_round_trip(client):
    messages = [{"role": "user", "content": "서울 날씨 어때?"}]
    first = await client.chat.completions.create(model="local", max_tokens=60, temperature=0, messages=messages,
                                                 tools=[WEATHER, BOOKS], tool_choice="required")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name in ("get_weather", "search_books")
    arguments = json.loads(call.function.arguments)  # a JSON string that parses, following the tool's schema
    assert set(arguments) <= {"city", "query"} and all(isinstance(v, str) for v in arguments.values())
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "맑음, 기온 21도, 습도 40%"}]
    second = await client.chat.completions.create(model="local", max_tokens=40, temperature=0, messages=messages,
                                                  tools=[WEATHER, BOOKS], tool_choice="none")
    assert second.choices[0].finish_reason in ("stop", "length") and second.choices[0].message.content.strip()


async def test_a_named_tool_choice_calls_that_tool(client):
    out = await client.chat.completions.create(
        model="local", max_tokens=60, temperature=0, tools=[WEATHER, BOOKS],
        tool_choice={"type": "function", "function": {"name": "search_books"}},
        messages=[{"role": "user", "content": "파이썬 입문서 찾아 줘"}])
    (call,) = out.choices[0].message.tool_calls
    assert call.function.name == "search_books" and json.loads(call.function.arguments)["query"]


@pytest.mark.parametrize("extra,param", [({"n": 2}, "n"), ({"logprobs": True}, "logprobs"),
                                         ({"presence_penalty": 0.5}, "presence_penalty")])
async def test_unsupported_fields_are_400_naming_the_field(client, extra, param):
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="local", messages=[{"role": "user", "content": "안녕"}], **extra)
    assert info.value.param == param and info.value.body["type"] == "invalid_request_error"


async def test_an_unknown_field_and_an_unknown_model(client):
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="local", messages=[{"role": "user", "content": "안녕"}],
                                             extra_body={"best_of": 3})
    assert info.value.param == "best_of" and info.value.code == "unsupported_parameter"
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(model="gpt-unknown", messages=[{"role": "user", "content": "안녕"}])
    assert missing.value.code == "model_not_found"


async def test_a_conversation_longer_than_the_context_is_context_length_exceeded(client):
    long_turn = "한국어 문장이 아주 길게 이어집니다. " * 600  # ~12,000 characters: over the 4,096-token context
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="local", max_tokens=8, messages=[
            {"role": "user", "content": long_turn}, {"role": "assistant", "content": "네."},
            {"role": "user", "content": long_turn}])
    assert info.value.code == "context_length_exceeded" and info.value.param == "messages"


async def test_models_lists_the_routes_next_to_the_embedding_model(client):
    ids = [m.id async for m in client.models.list()]
    assert "local" in ids and any(i.startswith("intfloat/") for i in ids)


async def test_a_framework_client_langchains_chatopenai_structured_output_and_tools(base_url):

    @tool
    def get_weather(city: str) -> str:
        """도시의 현재 날씨를 알려 준다."""
        return "맑음"

    llm = ChatOpenAI(base_url=base_url, api_key="unused", model="local", temperature=0, max_tokens=80,
                     max_retries=0, timeout=300)
    book = await llm.with_structured_output(Book).ainvoke("한강의 소설 '소년이 온다'(2014)의 제목, 연도, 장르")
    assert isinstance(book, Book)
    answer = await llm.bind_tools([get_weather], tool_choice="get_weather").ainvoke("부산 날씨 알려 줘")
    (call,) = answer.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"]["city"], str)
