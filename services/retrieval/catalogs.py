"""Catalogs: create, describe, list and delete (alias -> versioned collection)."""

from __future__ import annotations

import logging

from opentelemetry import trace

from services.bootstrap.errors import (
    FailedPrecondition,
)
from services.retrieval.query import (
    check_fields,
    check_name,
)
from services.retrieval.state import CatalogState
from services.retrieval.store import CatalogMeta

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.retrieval")


class CatalogAdmin:
    """Catalog management over the shared state."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state

    async def create(self, name: str, fields: dict[str, str]) -> tuple[CatalogMeta, int]:
        """Create a catalog (alias -> versioned collection)."""
        check_name(name)
        check_fields(fields)
        _, revision = await self.state.embed(["revision probe"], "passage", self.state.embed_timeout_s * 5)
        s = self.state
        meta = await s.run_db(s.store.create_catalog, name, fields, revision, s.analyzer.info.label(), s.dim, 64.0,
                              s.layout.label())
        self.state.remember(meta)
        return meta, 0

    async def describe(self, name: str) -> tuple[CatalogMeta, int]:
        """Metadata and document count."""
        meta = await self.state.meta(name)
        return meta, await self.state.run_db(self.state.store.count, meta.collection)

    async def list_catalogs(self) -> list[tuple[CatalogMeta, int]]:
        """Every catalog with its document count, by name."""
        metas = sorted(await self.state.run_db(self.state.store.list_meta), key=lambda m: m.name)
        return [(m, await self.state.run_db(self.state.store.count, m.collection)) for m in metas]

    async def delete_catalog(self, name: str) -> tuple[str, int]:
        """Remove a catalog and its data: (its versioned collection, documents it held)."""
        await self.state.meta(name)
        if name in self.state.reindexing:
            raise FailedPrecondition(f"collection {name!r} is being reindexed; delete it after the reindex finishes")
        async with self.state.gates[name].exclusive():  # no write in flight; later ones find no catalog
            await self.state.meta(name)  # NotFound when a concurrent delete won
            self.state.forget(name)
            out = await self.state.run_db(self.state.store.delete_catalog, name)
        self.state.gates.pop(name, None)
        return out
