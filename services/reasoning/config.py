"""Settings of the reasoning service process (env prefix ``MESH_REASONING_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.runtime.settings import ServiceSettings


class ReasoningSettings(ServiceSettings):
    """Reasoning service: streaming LLM calls with stage timeouts, failover and JSON-constrained reasons."""

    model_config = SettingsConfigDict(env_prefix="MESH_REASONING_")

    port: int = Field(50053, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    backend_url: str = Field("http://127.0.0.1:8081/v1",
                             description="primary OpenAI-compatible base URL (the local llama.cpp server by default)")
    backend_name: str = Field("local", description="name of the primary backend in usage and metrics")
    rule_reasons: bool = Field(
        True, description="a reason card the model failed twice gets code's short factual reason (source rule: the "
                          "query's words the item holds, its category, its price against the budget); off: no text")
    task_sections: bool = Field(
        True, description="a task's inputs named under its file's sections (a résumé, a posting) cut to the sections "
                          "the task reads before the prompt (issue 63); off: whole documents in the prompt")
    reasons_parallel: int = Field(
        1, ge=1, le=32, description="reason cards written at once (one call each): 1 for a one-slot server such as "
                                    "the embedded llama.cpp, the server's slots for vLLM or a hosted API")
    backend_model: str = Field("qwen2.5-coder-1.5b-instruct-q4", description="model name sent to the primary")
    backend_schema_format: Literal["json_object", "json_schema"] = Field(
        "json_object", description="how the primary takes a JSON schema (llama.cpp: json_object; vLLM: json_schema)")
    backend_api_key: SecretStr = Field(SecretStr(""), description="bearer key of the primary")
    backend_fresh_prompt: bool = Field(
        True, description="llama.cpp: a task that declares reproducible sampling is sent with cache_prompt false, so "
                          "its output never depends on what the KV cache held (a reused prefix changes the batch "
                          "sizes and with them the logits' last bits); turn off for a server that refuses unknown "
                          "fields")
    fallback_url: str = Field("", description="second OpenAI-compatible base URL (failover before the first token)")
    fallback_name: str = Field("fallback", description="name of the second backend")
    fallback_model: str = Field("", description="model name sent to the second backend")
    fallback_schema_format: Literal["json_object", "json_schema"] = Field("json_schema",
                                                                          description="schema format of the second")
    fallback_api_key: SecretStr = Field(SecretStr(""), description="bearer key of the second backend")
    gemini_api_key: SecretStr = Field(SecretStr(""),
                                      description="adds Gemini (google-genai) as the last backend when set")
    gemini_model: str = Field("gemini-2.5-flash", description="Gemini model")
    first_token_timeout_s: float = Field(5.0, gt=0, le=600, description="default first-token deadline")
    prefill_tokens_per_s: float = Field(
        110.0, ge=0, description="prompt tokens the backend reads per second: the first-token deadline of a call "
                                 "grows by its prompt's estimated tokens at this rate (the embedded model on two "
                                 "cores: ~110); 0: no allowance (a GPU backend reads thousands per second)")
    generation_timeout_s: float = Field(20.0, gt=0, le=600, description="default generation deadline")
    total_timeout_s: float = Field(30.0, gt=0, le=600, description="default deadline of a whole call")
    summary_timeout_s: float = Field(5.0, gt=0, le=600, description="deadline of a summary (no retry)")
    time_zone: str = Field("Asia/Seoul", description="the zone of 'today' told to the model with tools and used "
                                                     "to check date arguments (a system message naming today's "
                                                     "date as YYYY-MM-DD wins)")
    default_max_tokens: int = Field(256, ge=1, description="max_tokens when a request gives none")
    max_tokens_limit: int = Field(2048, ge=1, description="largest max_tokens a request may ask for")
    max_prompt_chars: int = Field(20000, ge=1, description="longest prompt, message or text accepted")
    max_conversation_chars: int = Field(100_000, ge=1, description="longest conversation (all messages) a "
                                                                   "Complete call accepts")
    max_messages: int = Field(256, ge=1, description="most messages in a Complete call")
    max_history_tokens: int = Field(3000, ge=1, description="cap on a chat history (estimated tokens)")
    max_concurrent_calls: int = Field(64, ge=1, description="calls in flight before RESOURCE_EXHAUSTED")
    prices_json: str = Field("{}", description='USD per 1M tokens: {"model": [prompt, completion]}')
    tasks_dirs: str = Field("", description="more directories of task files (comma-separated), served after the "
                                            "built-in ones (services/runtime/tasks/defs); a bad file stops the start")
    instance_name: str = Field("", description="name reported in usage (default host:port)")

    def task_dirs(self) -> list[Path]:
        """The extra task directories, in order."""
        return [Path(d.strip()) for d in self.tasks_dirs.split(",") if d.strip()]
