"""OpenAI-compatible chat completions over HTTP with SSE streaming (vLLM, llama.cpp server, ...)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Literal

import httpx

from services.reasoning.backends.base import (
    INFLIGHT,
    BackendError,
    BackendRejected,
    Chunk,
    ContextLengthExceeded,
    GenerationParams,
    LlmBackend,
)


class OpenAIBackend(LlmBackend):
    """POST {base_url}/chat/completions with ``stream: true``.

    ``schema_format`` says how the server takes a JSON schema: ``json_schema`` (OpenAI, vLLM) or
    ``json_object`` (llama-cpp-python's server: ``{"type": "json_object", "schema": ...}``).
    Closing the iterator closes the HTTP response, which is how a cancelled caller reaches the
    server (llama-cpp-python and vLLM stop generating for a closed connection).
    """

    def __init__(self, name: str, base_url: str, model: str, *, api_key: str = "",
                 schema_format: Literal["json_schema", "json_object"] = "json_schema",
                 connect_timeout_s: float = 2.0, fresh_prompt: bool = False) -> None:
        super().__init__(name=name, model=model)
        self.fresh_prompt = fresh_prompt  # the server takes llama.cpp's cache_prompt
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.models_url = base_url.rstrip("/") + "/models"
        self.schema_format = schema_format
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, connect=connect_timeout_s),
                                       limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))

    def body(self, messages: list[dict[str, str]], params: GenerationParams) -> dict:
        """The request body."""
        body: dict = {"model": params.model or self.model, "messages": messages, "stream": True,
                      "max_tokens": params.max_tokens, "temperature": params.temperature,
                      "stream_options": {"include_usage": True}}
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if self.fresh_prompt and params.fresh_prompt:
            body["cache_prompt"] = False  # llama.cpp: the same prompt, the same batches, the same output
        if params.json_schema is not None:
            if self.schema_format == "json_object":
                body["response_format"] = {"type": "json_object", "schema": params.json_schema}
            else:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": "answer", "schema": params.json_schema, "strict": True}}
        return body

    async def stream(self, messages: list[dict[str, str]], params: GenerationParams) -> AsyncIterator[Chunk]:
        """Yield chunks as the server streams them."""
        gauge = INFLIGHT.labels(self.name)
        gauge.inc()
        try:
            async with self._http.stream("POST", self.url, json=self.body(messages, params),
                                         timeout=httpx.Timeout(params.timeout_s, connect=2.0)) as resp:
                if resp.status_code != 200:
                    detail = (await resp.aread())[:300].decode("utf-8", "replace")
                    if resp.status_code == 400 and "context" in detail.lower():
                        # llama-server: "exceeds the available context size"; vLLM: "maximum context length"
                        raise ContextLengthExceeded(f"{self.name}: {detail}")
                    if rejected(resp.status_code, detail):
                        raise BackendRejected(f"{self.name}: HTTP {resp.status_code}: {detail}")
                    raise BackendError(f"{self.name}: HTTP {resp.status_code}: {detail}")
                finished = False
                finish_reason = None
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        finished = True
                        break
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise BackendError(f"{self.name}: malformed SSE data {data[:80]!r}") from None
                    if "error" in event:
                        raise BackendError(f"{self.name}: {event['error']}")
                    chunk = Chunk()
                    usage = event.get("usage")
                    if usage:
                        chunk.prompt_tokens = usage.get("prompt_tokens")
                        chunk.completion_tokens = usage.get("completion_tokens")
                        chunk.cached_prompt_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                    for choice in event.get("choices") or []:
                        chunk.text += (choice.get("delta") or {}).get("content") or ""
                        chunk.finish_reason = choice.get("finish_reason") or chunk.finish_reason
                    finish_reason = chunk.finish_reason or finish_reason
                    if chunk.text or chunk.finish_reason or usage:
                        yield chunk
                if not finished:
                    raise BackendError(f"{self.name}: stream ended without [DONE]")
                if finish_reason is None:  # e.g. a server that cut this stream short for another request
                    raise BackendError(f"{self.name}: stream ended without a finish reason (interrupted)")
        except httpx.HTTPError as err:
            raise BackendError(f"{self.name}: {type(err).__name__}: {err}") from None
        finally:
            gauge.dec()

    async def probe(self) -> None:
        """GET {base_url}/models: every OpenAI-compatible server (vLLM, llama.cpp) answers it cheaply."""
        try:
            resp = await self._http.get(self.models_url, timeout=httpx.Timeout(2.0, connect=1.0))
        except httpx.HTTPError as err:
            raise BackendError(f"{self.name}: {type(err).__name__}: {err}") from None
        if resp.status_code != 200:
            raise BackendError(f"{self.name}: GET /models answered HTTP {resp.status_code}")

    async def close(self) -> None:
        """Close the HTTP pool."""
        await self._http.aclose()


def rejected(status: int, detail: str) -> bool:
    """Whether an error answer refuses the request itself (the caller's), not the server being unwell.

    A 4xx other than 408, 409 and 429; and a 500 whose text says the grammar or the samplers could
    not be built (llama-server answers a schema it cannot compile so).
    """
    if 400 <= status < 500:
        return status not in (408, 409, 429)
    text = detail.lower()
    return status == 500 and ("sampler" in text or "grammar" in text)
