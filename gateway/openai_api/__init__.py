"""OpenAI-compatible embeddings and models."""
