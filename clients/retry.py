"""gRPC service configs that retry idempotent calls only, on UNAVAILABLE, with a short backoff."""

from __future__ import annotations

import json


def retry_options(service: str, idempotent_methods: list[str], attempts: int = 3) -> list[tuple[str, object]]:
    """Channel options enabling gRPC's built-in retries for the named (idempotent) methods."""
    config = {"methodConfig": [{
        "name": [{"service": service, "method": m} for m in idempotent_methods],
        "retryPolicy": {"maxAttempts": attempts, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
    }]}
    return [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(config))]
