"""Settings of the embedding service process (env prefix ``MESH_EMBEDDING_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.runtime.models import current_model_dir
from services.runtime.settings import ServiceSettings


class EmbeddingSettings(ServiceSettings):
    """Embedding service: multilingual-e5-small behind ONNX Runtime (in process) or Triton."""

    model_config = SettingsConfigDict(env_prefix="MESH_EMBEDDING_")

    port: int = Field(50051, ge=0, le=65535, description="gRPC port; 0 picks a free one")
    model_dir: Path = Field(default_factory=current_model_dir,
                            description="built model revision folder (python -m services.embedding.modelbuild)")
    engine: Literal["onnxruntime", "triton"] = Field("onnxruntime", description="inference engine")
    precision: Literal["fp32", "int8"] = Field("int8", description="model weights to serve")
    revision_label: str = Field(
        "", pattern=r"^([a-z0-9][a-z0-9._-]{0,31})?$",
        description="appended to the build's revision (<revision>+<label>) so this instance's vectors count as "
                    "another model's, e.g. fp32 weights served beside int8 during a model change; collections "
                    "built with one revision are never searched with another's vectors (empty: the build's own)")
    intra_op_threads: int = Field(0, ge=0, description="ONNX Runtime threads per inference; 0 = all cores")
    single_thread_max_tokens: int = Field(
        32, ge=0, le=4096, description="passes of at most this many padded tokens (a lone query) run on a "
        "second, single-threaded ORT session (faster for tiny passes; ~115 MB more for int8); 0 = off")
    max_batch_size: int = Field(32, ge=1, le=1024, description="most texts in one inference batch")
    max_batch_tokens: int = Field(2048, ge=512, le=65536, description="most tokens in one inference batch: "
                                  "a request of long texts runs as several, and stops between them when "
                                  "its caller leaves or its deadline passes")
    max_queue_delay_ms: float = Field(0.0, ge=0, le=1000,
                                      description="how long a forming batch waits for more texts")
    max_queue_texts: int = Field(1024, ge=1, description="texts waiting beyond this answer RESOURCE_EXHAUSTED")
    max_texts_per_request: int = Field(256, ge=1, description="most texts in one Embed request")
    max_text_chars: int = Field(20000, ge=1, description="longer texts are rejected before tokenisation")
    max_tokens: int = Field(512, ge=8, le=512, description="token limit per text (the model's is 512)")
    triton_url: str = Field("127.0.0.1:8001", description="Triton gRPC address (engine=triton)")
    triton_model: str = Field("e5_small", description="Triton model name (engine=triton)")
    triton_timeout_s: float = Field(10.0, gt=0, description="deadline of each Triton call")
