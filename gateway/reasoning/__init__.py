"""LLM features: recommendations with reasons, chat, summaries."""
