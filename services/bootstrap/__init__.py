"""Shared service bootstrap: server creation, health, errors, telemetry, settings."""
