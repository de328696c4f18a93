"""What each caller spends: usage per key, route and model; quotas answered with 429 (issue 65)."""
