"""Reasoning service: streaming LLM generation with stage timeouts, failover, JSON-constrained reasons."""
