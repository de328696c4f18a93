"""A backend's first calls through a typed client generated from the gateway's OpenAPI spec.

The spec the gateway serves at ``/openapi.json`` is kept in the repository (``gateway/openapi.json``);
generate a client from it (openapi-python-client, pinned in the ``dev`` extra), then run this against a
running mesh (``make run``)::

    .venv/bin/openapi-python-client generate --path gateway/openapi.json --meta none --output-path build/client
    PYTHONPATH=build/client .venv/bin/python docs/examples/rest_client.py http://localhost:8080

It creates a collection, ingests two Korean documents as a job, waits for the job and searches. Every
call returns the typed model of its status code (``ErrorBody`` for every error); CI generates the client
and runs this against the real gateway (tests/service/test_generated_client.py).
"""

from __future__ import annotations

import sys
import time

from korean_inference_mesh_gateway_client import Client
from korean_inference_mesh_gateway_client.api.collections import (
    create_collection_v1_collections_post as create_collection,
)
from korean_inference_mesh_gateway_client.api.collections import ingest_v1_collections_name_documents_post as ingest
from korean_inference_mesh_gateway_client.api.jobs import job_v1_jobs_job_id_get as get_job
from korean_inference_mesh_gateway_client.api.search import search_v1_search_post as search
from korean_inference_mesh_gateway_client.models import (
    CollectionCreate,
    DocumentIn,
    ErrorBody,
    IngestRequest,
    Job,
    JobState,
    SearchRequest,
    SearchResponse,
)

DOCUMENTS = [("b1", "비 오는 날 읽기 좋은 잔잔한 장편소설"), ("b2", "파이썬으로 배우는 데이터 분석 입문")]


def run(base_url: str, collection: str = "client-example", api_key: str | None = None) -> list[str]:
    """Create ``collection`` (an existing one is kept), ingest, wait, search; the ids found, best first."""
    headers = {"X-API-Key": api_key} if api_key else {}
    with Client(base_url=base_url, headers=headers, timeout=30.0) as client:
        created = create_collection.sync_detailed(client=client, body=CollectionCreate(name=collection))
        if created.status_code not in (201, 409):  # 409: it exists already
            error = created.parsed.error if isinstance(created.parsed, ErrorBody) else created.content
            raise RuntimeError(f"create: {created.status_code} {error}")
        job = ingest.sync(collection, client=client,
                          body=IngestRequest(documents=[DocumentIn(id=i, text=t) for i, t in DOCUMENTS]))
        if not isinstance(job, Job):
            raise RuntimeError(f"ingest: {job}")
        deadline = time.monotonic() + 60
        while job.state in (JobState.QUEUED, JobState.RUNNING) and time.monotonic() < deadline:
            time.sleep(0.2)
            polled = get_job.sync(job.id, client=client)
            if not isinstance(polled, Job):
                raise RuntimeError(f"job: {polled}")
            job = polled
        if job.state != JobState.SUCCEEDED:
            raise RuntimeError(f"the ingest job ended {job.state}: {job.errors}")
        found = search.sync(client=client, body=SearchRequest(collection=collection, query="비 오는 날 읽을 책",
                                                                top_k=2))
        if not isinstance(found, SearchResponse):
            raise RuntimeError(f"search: {found}")
        return [hit.id for hit in found.hits]


if __name__ == "__main__":
    print(run(sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8080"))
