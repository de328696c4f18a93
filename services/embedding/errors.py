"""Errors of the embedding service (all map to gRPC codes through the bootstrap table)."""

from __future__ import annotations

from services.bootstrap.errors import DependencyUnavailable, FailedPrecondition


class ModelFilesMissing(FailedPrecondition):
    """The model folder lacks a file; run the model build."""


class EngineUnavailable(DependencyUnavailable):
    """The inference engine (e.g. a Triton server) did not answer."""
