"""The same catalog on both embedded engines (Qdrant Edge, qdrant-client local mode) answers alike.

``client-cluster`` is local mode driven exactly as a server cluster is: collections created with
shards, replication, write consistency and on-disk storage, reads sent with a read consistency
(local mode accepts and ignores them; no Qdrant server can run on these machines).
"""

import numpy as np
import pytest

from services.bootstrap.errors import Conflict, NotFound
from services.retrieval.query import Condition, Filter
from services.retrieval.store import LegQuery, QdrantOptions, StoredPoint, open_store

rng = np.random.default_rng(3)
VECS = rng.standard_normal((40, 8)).astype(np.float32)
POINTS = [StoredPoint(f"d{i}", f"문서 {i}", {"category": ["소설", "IT", "여행"][i % 3], "price": 1000 * i,
                                              "available": i % 4 != 0},
                      VECS[i].tolist(), sorted({int(x) for x in rng.choice(30, 4, replace=False)}),
                      []) for i in range(40)]
for p in POINTS:
    p.sparse_values = [float(v) for v in rng.uniform(0.5, 2.0, len(p.sparse_indices))]
FILTERS = [
    Filter(),
    Filter(must=(Condition("category", equals="IT"),)),
    Filter(must=(Condition("price", gte=5000, lt=30000),), must_not=(Condition("available", equals=False),)),
    Filter(must=(Condition("category", any_of=("소설", "여행")), Condition("available", equals=True))),
]
FIELDS = {"category": "keyword", "price": "integer", "available": "bool"}
CLUSTER = QdrantOptions(shard_number=6, replication_factor=2, write_consistency_factor=2, on_disk="all",
                        read_consistency="majority")
ENGINES = ["edge", "client", "client-cluster"]


def open_engine(name):
    """An empty in-memory store of one engine variant."""
    if name == "client-cluster":
        return open_store(":memory:", "client", options=CLUSTER)
    return open_store(":memory:", name)


@pytest.fixture(params=ENGINES)
def store(request):
    s = open_engine(request.param)
    meta = s.create_catalog("c", FIELDS, "rev", "an", 8, 4.0)
    s.upsert(meta.collection, POINTS)
    yield s, meta.collection
    s.close()


def run(store_and_collection, kind, flt, **kw):
    s, collection = store_and_collection
    q = LegQuery(kind=kind, limit=10, filter=flt, dense=(VECS[5] + 0.1).tolist(), sparse_indices=(1, 2, 3, 7),
                 sparse_values=(1.0, 1.0, 1.0, 1.0), **kw)
    return [h.doc_id for h in s.query(collection, [q])[0]]


def expected(kind, flt):
    """Reference answers computed here (exact dense cosine; sparse dot with Qdrant's IDF)."""
    keep = []
    for p in POINTS:
        ok = all(_holds(c, p.payload) for c in flt.must) and not any(_holds(c, p.payload) for c in flt.must_not)
        if ok:
            keep.append(p)
    if kind == "dense":
        q = VECS[5] + 0.1
        score = {p.doc_id: float(np.dot(q, p.dense) / (np.linalg.norm(q) * np.linalg.norm(p.dense))) for p in keep}
    else:
        n = len(POINTS)
        df = {t: sum(t in p.sparse_indices for p in POINTS) for t in (1, 2, 3, 7)}
        idf = {t: np.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
        score = {}
        for p in keep:
            s = sum(idf[t] * v for t, v in zip(p.sparse_indices, p.sparse_values, strict=True) if t in idf)
            if s > 0:
                score[p.doc_id] = s
    return sorted(score, key=score.get, reverse=True)[:10]


def _holds(c, payload):
    v = payload.get(c.field)
    if c.any_of is not None:
        return v in c.any_of
    if c.is_range:
        return ((c.gte is None or v >= c.gte) and (c.gt is None or v > c.gt) and (c.lte is None or v <= c.lte)
                and (c.lt is None or v < c.lt))
    return v == c.equals


@pytest.mark.parametrize("flt", FILTERS)
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_legs_match_the_reference_on_both_engines(store, kind, flt):
    assert run(store, kind, flt) == expected(kind, flt)


@pytest.mark.parametrize("flt", FILTERS[:2])
def test_engine_fused_rrf_is_the_same_on_both_engines(flt):
    answers = []
    for engine in ENGINES:
        s = open_engine(engine)
        meta = s.create_catalog("c", FIELDS, "rev", "an", 8, 4.0)
        s.upsert(meta.collection, POINTS)
        answers.append(run((s, meta.collection), "fused", flt, fusion="rrf", rrf_k=60, prefetch_limit=20))
        s.close()
    assert answers[0] == answers[1] == answers[2]


def test_catalog_registry_aliases_and_persistence(tmp_path):
    s = open_store(str(tmp_path / "edge"))
    meta = s.create_catalog("books", FIELDS, "rev", "an", 8, 4.0)
    with pytest.raises(Conflict):
        s.create_catalog("books", FIELDS, "rev", "an", 8, 4.0)
    s.upsert(meta.collection, POINTS[:5])
    s.delete(meta.collection, ["d0", "nope"])
    v2 = s.create_version("books", FIELDS, 8)
    s.swap_alias("books", v2)
    assert s.alias_target("books") == v2
    s.swap_alias("books", meta.collection)
    s.close()
    again = open_store(str(tmp_path / "edge"))
    assert again.get_meta("books").collection == meta.collection and again.count(meta.collection) == 4
    assert sorted(d.doc_id for page in again.scroll_all(meta.collection, 2) for d in page) == ["d1", "d2", "d3", "d4"]
    with pytest.raises(NotFound):
        again.get_meta("other")
    again.close()
