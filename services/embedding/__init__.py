"""Embedding service: multilingual-e5-small over ONNX Runtime or Triton."""
