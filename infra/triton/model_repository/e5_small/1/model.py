"""Triton Python-backend model: multilingual-e5-small through ONNX Runtime on the CPU.

Runs inside Triton's own virtual environment (numpy<2); see ``infra/triton/launcher.py``.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}


class TritonPythonModel:
    """Runs every request of a Triton batch through one ORT session."""

    def initialize(self, args):
        """Load the ONNX file chosen by the ``precision`` parameter."""
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        precision = params.get("precision", "int8")
        folder = os.path.join(args["model_repository"], args["model_version"])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(params.get("intra_op_threads", "0"))
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(os.path.join(folder, FILES[precision]), opts,
                                            providers=["CPUExecutionProvider"])

    def execute(self, requests):
        """One ORT run per request (requests of different lengths cannot share a tensor)."""
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy()
            mask = pb_utils.get_input_tensor_by_name(request, "attention_mask").as_numpy()
            out = self.session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
            tensor = pb_utils.Tensor("sentence_embedding", np.ascontiguousarray(out, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        return responses
