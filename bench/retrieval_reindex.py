"""Search latency while a reindex runs, against the same searches idle (issue 17 defect 14).

    python -m bench.retrieval_reindex [--docs 1500] [--searches 60] [--out bench/results]

The real embedding and retrieval services as processes; a catalog of synthetic Korean product
texts written here; hybrid searches by query text (so each one embeds its query and analyses it
on the retrieval service's analyser thread, both of which the reindex also uses), one at a time.
Two variants of the retrieval process run side by side in one run on the same folder: the service
as built (bulk analysis in slices of ``BULK_SLICE_CHARS``, re-embedding in calls of
``REINDEX_EMBED_TEXTS``) and "unsliced", the same code with both set so large that a reindex
analyses all its documents in one call and embeds a whole batch per call, as before the fix.
Nothing here is tuned: the slice sizes were set from the analyser's speed, not from this bench.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT, LatencyStats, md_table, start_service, stop_service
from bench.report import write_result
from clients.retrieval import AsyncRetrievalClient, Document, ReindexSummary

ITEMS = ["무선 이어폰", "캠핑 테이블", "거위털 패딩", "텀블러", "그림 동화책", "데이터 분석 입문서", "여행 가이드북",
         "커피 그라인더", "러닝화", "전기 주전자", "노트북 거치대", "가습기", "요가 매트", "블루투스 스피커"]
TRAITS = ["가볍고 튼튼한", "선물하기 좋은", "가성비 좋은", "프리미엄", "초보자를 위한", "휴대하기 편한", "조용한",
          "디자인이 예쁜", "오래 쓰는", "세척이 쉬운"]
QUERIES = ["부모님 선물로 좋은 가습기", "캠핑 갈 때 쓸 탁자", "출퇴근용 무선 이어폰", "초보자를 위한 데이터 분석 책",
           "겨울에 입을 따뜻한 패딩", "사무실에서 쓸 조용한 커피 그라인더"]
Stages = list[tuple[float, float, float]]  # server ms per search: embed, tokenize, search
UNSLICED = ("import services.retrieval.state as s\nimport services.retrieval.reindex as r\n"
            "s.BULK_SLICE_CHARS = 10**12\nr.REINDEX_EMBED_TEXTS = 10**6\n")


def product(i: int) -> Document:
    """A synthetic product text of ~120-200 characters."""
    item, trait = ITEMS[i % len(ITEMS)], TRAITS[(i // len(ITEMS)) % len(TRAITS)]
    text = (f"{trait} {item} {i}호. {item}을 찾는 분께 추천합니다. {TRAITS[(i * 7) % len(TRAITS)]} 제품으로 "
            f"매일 쓰기 좋고, 배송이 빠르며 구성품이 알찹니다. 후기 평점이 높은 {item} 모델입니다.")
    return Document(id=f"p{i}", text=text)


async def timed_searches(client: AsyncRetrievalClient, n: int | None, stop: asyncio.Event | None = None,
                         stages: Stages | None = None) -> list[float]:
    """Hybrid searches one after another: ``n`` of them, or until ``stop`` is set (``stages``: server ms)."""
    out: list[float] = []
    i = 0
    while (n is not None and i < n) or (n is None and stop is not None and not stop.is_set()):
        t = time.perf_counter()
        r = await client.search("shop", QUERIES[i % len(QUERIES)], top_k=10)
        out.append(time.perf_counter() - t)
        if stages is not None:
            stages.append((r.timings.embed_ns / 1e6, r.timings.tokenize_ns / 1e6, r.timings.search_ns / 1e6))
        i += 1
    return out


async def idle_then_during_reindex(target: str, searches: int, fresh: bool,
                                   docs: int) -> tuple[list[float], list[float], Stages, float]:
    """Idle search times, search times during a reindex (with the server's split), and the reindex's seconds."""
    async with AsyncRetrievalClient(target, timeout_s=30) as client:
        if fresh:
            await client.create_collection("shop", {}, timeout_s=60)
            for i in range(0, docs, 128):
                await client.upsert("shop", [product(j) for j in range(i, min(docs, i + 128))], timeout_s=120)
        await timed_searches(client, 10)  # warm-up, excluded
        idle = await timed_searches(client, searches)
        stop = asyncio.Event()
        stages: Stages = []
        searcher = asyncio.create_task(timed_searches(client, None, stop, stages))
        t = time.perf_counter()
        try:
            events = [e async for e in client.reindex("shop", batch_size=64, timeout_s=600)]
            reindex_s = time.perf_counter() - t
        finally:
            stop.set()
        during = await searcher
        assert isinstance(events[-1], ReindexSummary) and events[-1].documents == docs
    return idle, during, stages, reindex_s


def run_variant(name: str, folder: Path, emb_port: int, searches: int, fresh: bool, docs: int) -> dict:
    """Idle searches, then the same searches during a reindex, on one retrieval process."""
    env = None
    if name == "unsliced":
        site = Path(tempfile.mkdtemp(prefix="bench-unsliced-"))
        (site / "sitecustomize.py").write_text(UNSLICED)
        env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc, port = start_service("services.retrieval", "--qdrant-location", str(folder), "--embedding-target",
                               f"127.0.0.1:{emb_port}", env=env)
    try:
        idle, during, stages, reindex_s = asyncio.run(
            idle_then_during_reindex(f"127.0.0.1:{port}", searches, fresh, docs))
    finally:
        stop_service(proc)
    quiet, busy = LatencyStats.of(idle), LatencyStats.of(during)
    split = {k: float(np.median([row[j] for row in stages]))
             for j, k in enumerate(["embed_ms", "tokenize_ms", "search_ms"])}
    return {"variant": name, "idle": quiet.__dict__, "during": busy.__dict__, "reindex_s": reindex_s,
            "during_split": split, "ratio_p50": busy.p50 / quiet.p50, "ratio_p95": busy.p95 / quiet.p95}


def main() -> None:
    """Run both variants and write bench/results/retrieval_reindex.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval_reindex", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1500)
    parser.add_argument("--searches", type=int, default=60, help="timed idle searches per variant")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    emb, emb_port = start_service("services.embedding", "--intra-op-threads", "1")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-reindex-") as tmp:
            for k, variant in enumerate(["sliced", "unsliced"]):
                rows.append(run_variant(variant, Path(tmp) / "q", emb_port, args.searches, k == 0, args.docs))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        stop_service(emb)
    write_report(args, rows)


def write_report(args, rows: list[dict]) -> None:
    """Markdown and JSON."""
    table = md_table(
        ["variant", "idle p50 ms", "idle p95 ms", "during reindex p50 ms", "during p95 ms", "searches during",
         "p50 ratio", "p95 ratio", "reindex s", "during: embed / analyse / search p50 ms"],
        [[r["variant"], f"{r['idle']['p50']:.1f}", f"{r['idle']['p95']:.1f}", f"{r['during']['p50']:.1f}",
          f"{r['during']['p95']:.1f}", str(r["during"]["n"]), f"{r['ratio_p50']:.2f}", f"{r['ratio_p95']:.2f}",
          f"{r['reindex_s']:.1f}", "{embed_ms:.1f} / {tokenize_ms:.1f} / {search_ms:.1f}".format(**r["during_split"])]
         for r in rows])
    body = f"""- Other work was running on the machine, so compare the ratios (measured in one run), not absolute times.
- {args.docs} synthetic Korean product texts (~150 characters), reindex batch 64 (the gateway's), hybrid searches by
  query text through gRPC one at a time: idle first, then throughout the reindex, on the same process.
- `sliced`: the service as built. `unsliced`: the same code with the slices made unbounded (all analysis in one
  call, a whole batch per embedding call), standing for the behaviour before the fix.

{table}

Target (issue 17): search latency during a reindex stays near normal (the issue measured p50 378 ms).
The last column splits the server's time per search during the reindex (medians of the response's own timings):
what the retrieval service does itself (analysis, the database) against the wait for the query's embedding in
the embedding service, which the reindex's passage batches also use.
"""
    write_result("retrieval_reindex", "Search during a reindex", body.splitlines(), {"rows": rows}, out=args.out)


if __name__ == "__main__":
    main()
