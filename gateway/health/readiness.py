"""Readiness through the clients: each dependency's health per capability, and what the gateway can serve.

Search needs retrieval (``unavailable``, 503, without it); without dense search (embedding down, or
retrieval's dense capability down) it answers keyword-only (``degraded``). OCR, OCR jobs, reasoning
and the shared cache are reported, never required: their routes answer 503 on their own.
"""

from __future__ import annotations

import asyncio

from clients import health as names
from clients.health import HealthCheck
from gateway.health import models as api
from gateway.vectors.cache import EmbeddingCache


async def readiness(embedding: HealthCheck, retrieval: HealthCheck, ocr: HealthCheck,
                    reasoning: dict[str, HealthCheck], cache: EmbeddingCache,
                    timeout_s: float = 0.5) -> tuple[api.Health, bool]:
    """The readiness body and whether this instance should take search traffic."""
    checks = {
        "embedding": embedding.health(names.EMBEDDING, timeout_s),
        "retrieval": retrieval.health(names.RETRIEVAL, timeout_s),
        "retrieval.dense": retrieval.health(names.RETRIEVAL_DENSE, timeout_s),
        "ocr": ocr.health(names.OCR, timeout_s),
        "ocr.jobs": ocr.health(names.OCR_JOBS, timeout_s),
        "cache": cache.health(timeout_s),
    }
    for target, client in reasoning.items():
        checks["reasoning" if len(reasoning) == 1 else f"reasoning@{target}"] = client.health(names.REASONING,
                                                                                              timeout_s)
    results = await asyncio.gather(*checks.values())
    states = dict(zip(checks, results, strict=True))
    if states["retrieval"] != "SERVING":
        return api.Health(status="unavailable", services=states), False
    dense = states["embedding"] == "SERVING" and states["retrieval.dense"] == "SERVING"
    return api.Health(status="ok" if dense else "degraded", services=states), True
