"""LLM backends behind one interface, built from settings in failover order."""

from __future__ import annotations

from services.reasoning.backends.base import BackendError, Chunk, GenerationParams, LlmBackend
from services.reasoning.config import ReasoningSettings


def make_backends(s: ReasoningSettings) -> list[LlmBackend]:
    """Primary, then the optional second OpenAI-compatible backend, then Gemini when a key is set."""
    from services.reasoning.backends.openai_http import OpenAIBackend

    backends: list[LlmBackend] = [OpenAIBackend(s.backend_name, s.backend_url, s.backend_model,
                                                api_key=s.backend_api_key.get_secret_value(),
                                                schema_format=s.backend_schema_format,
                                                fresh_prompt=s.backend_fresh_prompt)]
    if s.fallback_url:
        backends.append(OpenAIBackend(s.fallback_name, s.fallback_url, s.fallback_model or s.backend_model,
                                      api_key=s.fallback_api_key.get_secret_value(),
                                      schema_format=s.fallback_schema_format))
    if s.gemini_api_key.get_secret_value():
        from services.reasoning.backends.gemini import GeminiBackend

        backends.append(GeminiBackend("gemini", s.gemini_model, s.gemini_api_key.get_secret_value()))
    return backends


__all__ = ["BackendError", "Chunk", "GenerationParams", "LlmBackend", "make_backends"]
