"""Answers grounded in a collection: ``POST /v1/answers``."""
