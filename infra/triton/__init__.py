"""NVIDIA Triton: model repository (CPU Python backend, GPU onnxruntime backend) and a launcher."""
