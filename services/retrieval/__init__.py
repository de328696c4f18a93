"""Retrieval service: Qdrant dense + Korean BM25 sparse vectors, fused hybrid search."""
