"""NVIDIA Triton through tritonclient gRPC (the model repository lives in ``infra/triton/``)."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as tgrpc
from tritonclient.utils import InferenceServerException

from services.embedding.engine.base import EmbeddingEngine
from services.embedding.engine.tokenizer import TokenBatch
from services.embedding.errors import EngineUnavailable


class TritonEngine(EmbeddingEngine):
    """Sends padded token batches to a Triton model with inputs ``input_ids``/``attention_mask``."""

    name = "triton"

    def __init__(self, url: str, model: str, precision: str, timeout_s: float) -> None:
        self.url = url
        self.model = model
        self.precision = precision
        self.timeout_s = timeout_s
        self._client = tgrpc.InferenceServerClient(url=url)
        self._output = tgrpc.InferRequestedOutput("sentence_embedding")

    def encode_core(self, batch: TokenBatch) -> np.ndarray:  # noqa: D102
        inputs = []
        for name, array in (("input_ids", batch.input_ids), ("attention_mask", batch.attention_mask)):
            tensor = tgrpc.InferInput(name, list(array.shape), "INT64")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        try:
            result = self._client.infer(self.model, inputs, outputs=[self._output],
                                        client_timeout=self.timeout_s)
        except InferenceServerException as exc:
            raise EngineUnavailable(f"triton at {self.url} failed: {exc.message()}") from exc
        return result.as_numpy("sentence_embedding")

    def wait_ready(self, timeout_s: float) -> None:
        """Block until Triton reports the model ready."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._client.is_model_ready(self.model, client_timeout=1.0):
                    return
            except InferenceServerException:
                pass
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"triton model {self.model} at {self.url} not ready")
            time.sleep(0.2)

    def close(self) -> None:  # noqa: D102
        self._client.close()
