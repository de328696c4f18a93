"""Collections, documents and their ingest/reindex jobs."""
