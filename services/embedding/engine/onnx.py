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


def _session(path: Path, intra_op_threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_op_threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle ORT threads must not spin: on a small host they would steal the cores the event
    # loop and gRPC need between batches.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class OnnxRuntimeEngine(EmbeddingEngine):
    """One ORT session; ``intra_op_threads`` 0 lets ORT use every core.

    Passes of at most ``single_thread_max_tokens`` padded tokens (a lone short query) run on a
    second, single-threaded session of the same file: splitting a pass that small over threads
    costs more in hand-offs than it saves (measured 2.4 vs 2.9 ms p50 per query on 2 cores), and it
    leaves the other core to gRPC. 0 turns the second session off (it costs ~115 MB for int8).
    """

    name = "onnxruntime"

    def __init__(self, model_dir: Path, precision: str = "int8", intra_op_threads: int = 0,
                 single_thread_max_tokens: int = 32) -> None:
        path = model_file(model_dir, precision)
        if not path.exists():
            from services.embedding.errors import ModelFilesMissing

            raise ModelFilesMissing(f"{path} not found; run: python -m services.embedding.modelbuild")
        self.precision = precision
        self._session = _session(path, intra_op_threads)
        self.single_thread_max_tokens = single_thread_max_tokens
        self._single: ort.InferenceSession | None = None
        if single_thread_max_tokens > 0 and intra_op_threads != 1 and (intra_op_threads or _cores()) > 1:
            self._single = _session(path, 1)
        # The CPU arena keeps every chunk it ever grew for the life of the session; a run with this
        # option frees the chunks not in use when it ends.
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._tiny = {"input_ids": np.array([[0, 6, 2]], dtype=np.int64),
                      "attention_mask": np.ones((1, 3), dtype=np.int64)}

    def encode_core(self, batch: TokenBatch) -> np.ndarray:  # noqa: D102
        session = self._session
        if self._single is not None and batch.input_ids.size <= self.single_thread_max_tokens:
            session = self._single
        return session.run(
            ["sentence_embedding"],
            {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask},
        )[0]

    def warm_up(self) -> None:
        """Run a small batch through each session (the multi-threaded one with a batch too big for the other)."""
        self._session.run(["sentence_embedding"], self._tiny)
        if self._single is not None:
            self._single.run(["sentence_embedding"], self._tiny)

    def release_memory(self) -> None:
        """Run a one-token batch with arena shrinkage: the big batch's chunks go back to the OS."""
        self._session.run(["sentence_embedding"], self._tiny, self._shrink)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
