"""The Qdrant server path: settings -> QdrantOptions -> qdrant-client, and what reaches the server.

No Qdrant server binary can be installed on these machines (no Docker, no registry package ships
one), so the server itself never runs here. What is covered instead:

- settings, one-line errors and the API key file (``store_options``);
- the real ``QdrantClient`` that ``open_client`` builds, read back from its resolved configuration
  (scheme, headers, gRPC port and options, timeout, TLS context), not from mocks;
- the collection layout and read consistency the store hands to qdrant-client (a recording subclass
  of the real client over local mode, so the whole catalog flow runs);
- the bytes qdrant-client puts on the wire for a server, on both transports: gRPC against a stand-in
  that implements qdrant-client's own generated Qdrant servicers, and REST through an httpx transport
  that records each request. Both answer only the calls made while a catalog is created.
"""

from __future__ import annotations

import json
import ssl
import threading
from pathlib import Path

import certifi
import httpx
import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.grpc import collections_pb2, collections_service_pb2_grpc, points_pb2, points_service_pb2_grpc
from qdrant_client.local.qdrant_local import QdrantLocal
from qdrant_client.qdrant_remote import QdrantRemote

from services.retrieval.config import RetrievalSettings
from services.retrieval.query import Filter
from services.retrieval.store import DENSE, SPARSE, LegQuery, QdrantOptions, StoredPoint, open_store, store_options
from services.retrieval.store.client import META_COLLECTION, ClientCatalogStore, open_client
from services.runtime.settings import settings_from_cli
from support import free_port  # nothing listens there: qdrant-client's version check fails at once
from support.servers import threaded_grpc_server

# qdrant-client checks the server version from a thread at construction; no server answers here.
pytestmark = pytest.mark.filterwarnings("ignore:Failed to obtain server version:UserWarning")


@pytest.fixture(autouse=True)
def _version_checks_end_with_their_test():
    """Join the version-check threads a test started, so their warning stays inside that test."""
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.daemon:
            thread.join(timeout=5)

CLUSTER = QdrantOptions(api_key="s3cret-key", shard_number=6, replication_factor=2, write_consistency_factor=2,
                        on_disk="all", read_consistency="majority")
FIELDS = {"category": "keyword", "price": "integer"}


# ------------------------------------------------------------------------------------------- settings


def test_settings_from_the_environment_and_a_key_file(tmp_path, monkeypatch):
    key_file = tmp_path / "api-key"
    key_file.write_text("s3cret-key\n")
    for name, value in {"QDRANT_LOCATION": "https://qdrant.mesh:6333", "QDRANT_API_KEY_FILE": str(key_file),
                        "QDRANT_CA_CERT": certifi.where(), "QDRANT_GRPC_PORT": "6444", "SHARD_NUMBER": "6",
                        "REPLICATION_FACTOR": "2", "WRITE_CONSISTENCY_FACTOR": "2", "ON_DISK": "vectors",
                        "READ_CONSISTENCY": "majority"}.items():
        monkeypatch.setenv(f"MESH_RETRIEVAL_{name}", value)
    settings = settings_from_cli(RetrievalSettings, "retrieval", [])  # nothing secret on argv
    opts = store_options(settings)
    assert opts == QdrantOptions(api_key="s3cret-key", https=False, ca_cert=certifi.where(), prefer_grpc=True,
                                 grpc_port=6444, shard_number=6, replication_factor=2, write_consistency_factor=2,
                                 on_disk="vectors", read_consistency="majority")
    assert opts.vectors_on_disk and not opts.payload_on_disk
    assert "s3cret" not in repr(opts) and "s3cret" not in repr(settings)


def test_defaults_leave_the_layout_to_the_server():
    opts = store_options(RetrievalSettings())
    assert opts == QdrantOptions()
    assert (opts.api_key, opts.shard_number, opts.replication_factor, opts.read_consistency) == (None, None, None, None)
    assert opts.prefer_grpc and opts.payload_on_disk and not opts.vectors_on_disk


def test_numeric_read_consistency_and_inline_key():
    opts = store_options(RetrievalSettings(read_consistency="2", qdrant_api_key="k"))
    assert opts.read_consistency == 2 and opts.api_key == "k"


@pytest.mark.parametrize(("argv", "names"), [
    (["--write-consistency-factor", "3", "--replication-factor", "2"], "write_consistency_factor"),
    (["--read-consistency", "most"], "read_consistency"),
    (["--qdrant-api-key-file", "/nonexistent/key"], "qdrant_api_key_file"),
    (["--on-disk", "sometimes"], "on_disk"),
])
def test_bad_settings_fail_in_one_line(argv, names, capsys):
    with pytest.raises(SystemExit) as exit_info:
        settings_from_cli(RetrievalSettings, "retrieval", argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and f"invalid setting {names}" in err


def test_a_key_and_a_key_file_together_are_refused(tmp_path, monkeypatch, capsys):
    key_file = tmp_path / "api-key"
    key_file.write_text("a")
    monkeypatch.setenv("MESH_RETRIEVAL_QDRANT_API_KEY", "b")
    with pytest.raises(SystemExit):
        settings_from_cli(RetrievalSettings, "retrieval", ["--qdrant-api-key-file", str(key_file)])
    assert "not both" in capsys.readouterr().err


def test_an_empty_key_file_is_an_error(tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("\n")
    with pytest.raises(ValueError, match="QDRANT_API_KEY_FILE"):
        store_options(RetrievalSettings(qdrant_api_key_file=key_file))


# ---------------------------------------------------------------------------- the client open_client builds


def test_server_client_carries_key_tls_grpc_and_timeout():
    port = free_port()
    opts = QdrantOptions(api_key="s3cret-key", https=True, ca_cert=certifi.where(), grpc_port=6444)
    client = open_client(f"http://127.0.0.1:{port}", 7.5, opts)
    try:
        remote = client._client
        assert isinstance(remote, QdrantRemote)
        assert remote.rest_uri == f"https://127.0.0.1:{port}" and remote._https  # the flag upgrades http://
        assert remote._api_key == "s3cret-key" and remote._rest_headers["api-key"] == "s3cret-key"
        assert ("api-key", "s3cret-key") in remote._grpc_headers
        assert remote._prefer_grpc and remote._grpc_port == 6444
        assert remote._timeout == 8  # seconds, rounded up: qdrant-client takes whole seconds
        assert remote._grpc_options["root_certificates"] == Path(certifi.where()).read_bytes()
        verify = remote._rest_args["verify"]
        assert isinstance(verify, ssl.SSLContext) and verify.cert_store_stats()["x509_ca"] > 0
        assert client.init_options["prefer_grpc"] is True and client.init_options["https"] is True
    finally:
        client.close()


def test_plain_server_client_defaults():
    port = free_port()
    client = open_client(f"http://127.0.0.1:{port}")
    try:
        remote = client._client
        assert isinstance(remote, QdrantRemote)
        assert remote.rest_uri == f"http://127.0.0.1:{port}" and not remote._https
        assert remote._prefer_grpc and remote._grpc_port == 6334 and remote._timeout == 10
        assert "api-key" not in remote._rest_headers and remote._grpc_headers == []
    finally:
        client.close()


def test_embedded_locations_ignore_connection_options(tmp_path):
    for location in (":memory:", str(tmp_path / "local")):
        client = open_client(location, options=QdrantOptions(api_key="k", https=True, ca_cert="/nonexistent"))
        assert isinstance(client._client, QdrantLocal)
        client.close()
    edge = open_store(":memory:", "edge", options=CLUSTER)  # Qdrant Edge: one local shard, options unused
    meta = edge.create_catalog("c", FIELDS, "rev", "an", 4, 3.0)
    assert edge.count(meta.collection) == 0
    edge.close()


# ------------------------------------------------------------------ layout and consistency handed to qdrant-client


class RecordingQdrantClient(QdrantClient):
    """The real client (local mode underneath) that also records collection layouts and read consistency."""

    def __init__(self) -> None:
        super().__init__(location=":memory:")
        self.created: dict[str, dict] = {}
        self.reads: list[tuple[str, object]] = []

    def create_collection(self, collection_name, **kwargs):  # noqa: D102
        self.created[collection_name] = kwargs
        return super().create_collection(collection_name, **kwargs)

    def query_batch_points(self, collection_name, requests, consistency=None, **kwargs):  # noqa: D102
        self.reads.append(("query", consistency))
        return super().query_batch_points(collection_name, requests, consistency=consistency, **kwargs)

    def retrieve(self, collection_name, ids, consistency=None, **kwargs):  # noqa: D102
        self.reads.append(("retrieve", consistency))
        return super().retrieve(collection_name, ids, consistency=consistency, **kwargs)

    def scroll(self, collection_name, consistency=None, **kwargs):  # noqa: D102
        self.reads.append(("scroll", consistency))
        return super().scroll(collection_name, consistency=consistency, **kwargs)


def test_collections_are_created_with_the_cluster_layout():
    client = RecordingQdrantClient()
    store = ClientCatalogStore(client, CLUSTER)
    meta = store.create_catalog("books", FIELDS, "rev", "an", 4, 3.0)
    point = StoredPoint("d1", "소설", {"category": "IT", "price": 1}, [1.0, 0, 0, 0], [3], [1.0])
    store.upsert(meta.collection, [point])
    hits = store.query(meta.collection, [LegQuery("dense", 5, Filter(), dense=[1.0, 0, 0, 0])])
    docs = [d.doc_id for page in store.scroll_all(meta.collection) for d in page]
    assert store.get_meta("books").collection == meta.collection
    assert [h.doc_id for h in hits[0]] == docs == ["d1"]
    layout = client.created[meta.collection]
    assert (layout["shard_number"], layout["replication_factor"], layout["write_consistency_factor"]) == (6, 2, 2)
    assert layout["on_disk_payload"] is True
    assert layout["vectors_config"][DENSE].on_disk is True
    assert layout["sparse_vectors_config"][SPARSE].index.on_disk is True
    assert layout["sparse_vectors_config"][SPARSE].modifier == models.Modifier.IDF
    catalogs = client.created[META_COLLECTION]
    assert (catalogs["shard_number"], catalogs["replication_factor"], catalogs["write_consistency_factor"]) == (1, 2, 2)
    assert {kind for kind, _ in client.reads} == {"query", "retrieve", "scroll"}
    assert {c for _, c in client.reads} == {models.ReadConsistencyType.MAJORITY}
    store.close()


def test_without_options_the_server_defaults_apply():
    client = RecordingQdrantClient()
    store = ClientCatalogStore(client)
    meta = store.create_catalog("books", FIELDS, "rev", "an", 4, 3.0)
    layout = client.created[meta.collection]
    assert (layout["shard_number"], layout["replication_factor"], layout["write_consistency_factor"]) == (None,) * 3
    assert layout["on_disk_payload"] is True and layout["vectors_config"][DENSE].on_disk is False
    store.get_meta("books")
    assert {c for _, c in client.reads} == {None}
    store.close()


# ------------------------------------------------------------------------------- what goes over the wire


class RecordingCollections(collections_service_pb2_grpc.CollectionsServicer):
    """qdrant-client's generated Collections servicer, answering catalog creation and recording it."""

    def __init__(self) -> None:
        self.created: list[collections_pb2.CreateCollection] = []
        self.metadata: list[dict[str, str]] = []
        self.deadlines: list[float] = []

    def CollectionExists(self, request, context):  # noqa: D102, N802
        self.metadata.append(dict(context.invocation_metadata()))
        return collections_pb2.CollectionExistsResponse(result=collections_pb2.CollectionExists(exists=False))

    def Create(self, request, context):  # noqa: D102, N802
        self.created.append(request)
        self.metadata.append(dict(context.invocation_metadata()))
        self.deadlines.append(context.time_remaining())
        return collections_pb2.CollectionOperationResponse(result=True)


class RecordingPoints(points_service_pb2_grpc.PointsServicer):
    """qdrant-client's generated Points servicer, answering payload-index creation."""

    def CreateFieldIndex(self, request, context):  # noqa: D102, N802
        return points_pb2.PointsOperationResponse(
            result=points_pb2.UpdateResult(operation_id=1, status=points_pb2.UpdateStatus.Completed))


@pytest.fixture
def grpc_standin():
    collections = RecordingCollections()
    with threaded_grpc_server(lambda s: collections_service_pb2_grpc.add_CollectionsServicer_to_server(collections, s),
                              lambda s: points_service_pb2_grpc.add_PointsServicer_to_server(RecordingPoints(), s)
                              ) as port:
        yield collections, port


def test_grpc_requests_carry_the_layout_the_key_and_the_deadline(grpc_standin):
    collections, grpc_port = grpc_standin
    opts = QdrantOptions(api_key="s3cret-key", grpc_port=grpc_port, shard_number=6, replication_factor=2,
                         write_consistency_factor=2, on_disk="vectors")
    with pytest.warns(UserWarning, match="insecure connection"):  # a plain-text stand-in; TLS is checked above
        client = open_client(f"http://127.0.0.1:{free_port()}", 5, opts)
    store = ClientCatalogStore(client, opts)
    store.create_version("books", FIELDS, 384)
    store.close()
    meta_request, catalog_request = collections.created
    assert meta_request.collection_name == META_COLLECTION and meta_request.shard_number == 1
    assert (catalog_request.shard_number, catalog_request.replication_factor,
            catalog_request.write_consistency_factor) == (6, 2, 2)
    assert catalog_request.on_disk_payload is False
    dense = catalog_request.vectors_config.params_map.map[DENSE]
    assert dense.size == 384 and dense.on_disk is True
    sparse = catalog_request.sparse_vectors_config.map[SPARSE]
    assert sparse.index.on_disk is True and sparse.modifier == collections_pb2.Modifier.Idf
    assert all(m.get("api-key") == "s3cret-key" for m in collections.metadata)
    assert collections.deadlines and all(d == pytest.approx(5, abs=0.5) for d in collections.deadlines)


def test_rest_requests_carry_the_layout_and_the_key():
    sent: list[tuple[str, str, dict, str | None]] = []

    def qdrant_rest(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        sent.append((request.method, request.url.path, body, request.headers.get("api-key")))
        if request.url.path.endswith("/exists"):
            return httpx.Response(200, json={"result": {"exists": False}, "status": "ok", "time": 0})
        if request.url.path.endswith("/index"):
            return httpx.Response(200, json={"result": {"operation_id": 1, "status": "completed"}, "status": "ok",
                                             "time": 0})
        return httpx.Response(200, json={"result": True, "status": "ok", "time": 0})

    opts = QdrantOptions(api_key="s3cret-key", prefer_grpc=False, shard_number=6, replication_factor=2,
                         write_consistency_factor=2, on_disk="payload")
    # The same constructor arguments open_client passes, plus the recording transport and no version check.
    client = QdrantClient(url="https://qdrant.mesh:6333", api_key=opts.api_key, prefer_grpc=False,
                          check_compatibility=False, transport=httpx.MockTransport(qdrant_rest))
    store = ClientCatalogStore(client, opts)
    collection = store.create_version("books", FIELDS, 384)
    store.close()
    creates = {path: body for method, path, body, _ in sent if method == "PUT" and path.count("/") == 2}
    layout = creates[f"/collections/{collection}"]
    assert (layout["shard_number"], layout["replication_factor"], layout["write_consistency_factor"]) == (6, 2, 2)
    assert layout["on_disk_payload"] is True and layout["vectors"][DENSE]["on_disk"] is False
    assert layout["sparse_vectors"][SPARSE] == {"index": {"on_disk": False}, "modifier": "idf"}
    assert creates[f"/collections/{META_COLLECTION}"]["shard_number"] == 1
    assert {key for *_, key in sent} == {"s3cret-key"}
