"""Model build: multilingual-e5-small reconstructed from registry packages, exported to ONNX."""
