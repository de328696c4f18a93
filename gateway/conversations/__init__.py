"""Conversations turned into searches: a per-turn change proposed by the model, a profile kept by code."""
