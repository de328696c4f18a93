"""The embedded LLM server: a pinned llama.cpp server (llama-cpp-python) and a GGUF model from registry packages."""
