"""ONNX Runtime in process (fp32 or int8 model file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.tokenizer import TokenBatch

MODEL_FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}


def model_file(model_dir: Path, precision: str) -> Path:
    """The ONNX file of a precision inside a built model folder."""
    return model_dir / MODEL_FILES[precision]


class OnnxRuntimeEngine(EmbeddingEngine):
    """One ORT session; ``intra_op_threads`` 0 lets ORT use every core."""

    name = "onnxruntime"

    def __init__(self, model_dir: Path, precision: str = "int8", intra_op_threads: int = 0) -> None:
        path = model_file(model_dir, precision)
        if not path.exists():
            from services.embedding.errors import ModelFilesMissing

            raise ModelFilesMissing(f"{path} not found; run: python -m services.embedding.modelbuild")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle ORT threads must not spin: on a small host they would steal the cores the event
        # loop and gRPC need between batches.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.precision = precision
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def encode_core(self, batch: TokenBatch) -> np.ndarray:  # noqa: D102
        return self._session.run(
            ["sentence_embedding"],
            {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask},
        )[0]
