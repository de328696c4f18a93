"""Gemini through google-genai; requests are built with the SDK's types.

Needs an API key (unreachable from the development machines, so only its request building is
tested there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from services.reasoning.backends.base import INFLIGHT, BackendError, Chunk, GenerationParams, LlmBackend


class GeminiBackend(LlmBackend):
    """Streaming ``generate_content`` with the system message as ``system_instruction``."""

    def __init__(self, name: str, model: str, api_key: str) -> None:
        from google import genai

        super().__init__(name=name, model=model)
        self._client = genai.Client(api_key=api_key)

    @staticmethod
    def request(messages: list[dict[str, str]], params: GenerationParams):
        """(contents, config) for one call."""
        from google.genai import types

        system = "\n".join(m["content"] for m in messages if m["role"] == "system") or None
        contents = [types.Content(role="model" if m["role"] == "assistant" else "user",
                                  parts=[types.Part.from_text(text=m["content"])])
                    for m in messages if m["role"] != "system"]
        config = types.GenerateContentConfig(
            system_instruction=system, max_output_tokens=params.max_tokens, temperature=params.temperature,
            http_options=types.HttpOptions(timeout=int(params.timeout_s * 1000)),
            response_mime_type="application/json" if params.json_schema is not None else None,
            response_json_schema=params.json_schema, top_p=params.top_p, seed=params.seed,
            stop_sequences=list(params.stop) or None)
        return contents, config

    async def probe(self) -> None:
        """Fetch the model's metadata (no tokens billed); the monitor bounds its time."""
        from google.genai import errors

        try:
            await self._client.aio.models.get(model=self.model)
        except (errors.APIError, OSError) as err:
            raise BackendError(f"{self.name}: {type(err).__name__}: {err}") from None

    async def stream(self, messages: list[dict[str, str]], params: GenerationParams) -> AsyncIterator[Chunk]:
        """Yield chunks as Gemini streams them."""
        from google.genai import errors

        contents, config = self.request(messages, params)
        gauge = INFLIGHT.labels(self.name)
        gauge.inc()
        try:
            stream = await self._client.aio.models.generate_content_stream(model=self.model, contents=contents,
                                                                           config=config)
            async for resp in stream:
                chunk = Chunk(text=resp.text or "")
                if resp.usage_metadata is not None:
                    chunk.prompt_tokens = resp.usage_metadata.prompt_token_count
                    chunk.completion_tokens = resp.usage_metadata.candidates_token_count
                if resp.candidates and resp.candidates[0].finish_reason:
                    reason = str(resp.candidates[0].finish_reason.name).lower()
                    chunk.finish_reason = "length" if reason == "max_tokens" else "stop"
                yield chunk
        except (errors.APIError, OSError) as err:
            raise BackendError(f"{self.name}: {type(err).__name__}: {err}") from None
        finally:
            gauge.dec()
