"""Changing the embedding model of a live 10k-document collection: dense search throughout, the gate, a rollback.

    python -m bench.model_upgrade --data ../shared/data [--docs 10000] [--gate-queries 200] [--out bench/results]

The mesh as processes: three embedding instances (the build's e5 int8 revision; the same model's fp32
weights with the revision label ``fp32``, so its vectors count as another model's; the multilingual
USE behind the same interface, ``bench.use_embedding``), one retrieval service configured with all
three, and a gateway configured with all three. The collection holds the judged sets' documents
(autorag-ko pages and KLUE-STS sentences from ``--data``) and synthetic Korean product texts up to
``--docs``; the operator's gate set is those sets' judged queries (``--gate-queries`` of them, taken in
order from both, half each). Nothing is tuned here: the margin is seed 000's 2 points.

Three phases, each with searches through the gateway (one every 200 ms: hybrid, the gate's queries)
and writes straight to retrieval (acknowledged when the call returns) throughout:

1. upgrade e5 int8 -> USE with the gate: expected refused (USE scores lower: bench/results/embedding_gate.md);
2. upgrade e5 int8 -> e5 fp32 with the gate: expected to swap;
3. writes after the swap, then ``POST /v1/collections/{name}/rollback``: timed, and the searches after it.

Counted: searches answered keyword-only (``degraded``), acknowledged writes missing afterwards (every
write carries a phase tag and is looked up by filter), search p50 before and during each build.

``--retrieval-readers N`` runs retrieval as one writer and N readers (bench/retrieval_replicas.py: one
process over one embedded store, as no Qdrant server can be had here): the gateway searches through the
first reader and sends catalog work to the writer; writes go round-robin to every replica (a reader
refuses them, counted apart: never acknowledged); after each phase every reader must search the live
version (written to model_upgrade_replicas.{md,json}).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench.common import LatencyStats, free_port, md_table, start_service, stop_service
from bench.report import command_line, write_result
from clients.errors import MeshClientError
from clients.retrieval import AsyncRetrievalClient, Condition, Document, Filter

ITEMS = ["무선 이어폰", "캠핑 테이블", "거위털 패딩", "텀블러", "그림 동화책", "데이터 분석 입문서", "여행 가이드북",
         "커피 그라인더", "러닝화", "전기 주전자", "노트북 거치대", "가습기", "요가 매트", "블루투스 스피커"]
TRAITS = ["가볍고 튼튼한", "선물하기 좋은", "가성비 좋은", "프리미엄", "초보자를 위한", "휴대하기 편한", "조용한",
          "디자인이 예쁜", "오래 쓰는", "세척이 쉬운"]
COLLECTION = "shop"
MARGIN = 0.02

def product(i: int) -> Document:
    """A synthetic product text of ~120-200 characters (from the retired bench.retrieval_reindex)."""
    item, trait = ITEMS[i % len(ITEMS)], TRAITS[(i // len(ITEMS)) % len(TRAITS)]
    text = (f"{trait} {item} {i}호. {item}을 찾는 분께 추천합니다. {TRAITS[(i * 7) % len(TRAITS)]} 제품으로 "
            f"매일 쓰기 좋고, 배송이 빠르며 구성품이 알찹니다. 후기 평점이 높은 {item} 모델입니다.")
    return Document(id=f"p{i}", text=text)



def judged_sets(data: Path, want: int) -> tuple[list[Document], list[dict[str, Any]]]:
    """The judged sets' documents and ``want`` of their queries (half from each set, in file order)."""
    from bench import fusion_eval as fe

    docs: list[Document] = []
    queries: list[dict[str, Any]] = []
    for ev in (fe.load_autorag(data), fe.load_klue(data)):
        docs += [Document(id=pid, text=text, payload={"kind": "judged"}) for pid, text in ev.passages]
        queries += [{"query": q, "relevant_ids": sorted(rel)} for q, rel in ev.queries[:want // 2]]
    return docs, queries


class Traffic:
    """Searches through the gateway and writes to retrieval, one after another each, until stopped."""

    def __init__(self, http: httpx.AsyncClient, retrieval: list[AsyncRetrievalClient], queries: list[str], phase: str,
                 write_every_s: float = 1.0, max_writes: int = 100, search_every_s: float = 0.2) -> None:
        self.http, self.retrieval, self.queries, self.phase = http, retrieval, queries, phase
        self.refused = 0  # writes a reader refused (round-robin over the replicas): never acknowledged
        self.write_every_s, self.max_writes, self.search_every_s = write_every_s, max_writes, search_every_s
        self.stop = asyncio.Event()
        self.latencies: list[float] = []
        self.degraded = 0
        self.errors: list[str] = []
        self.modes: dict[str, int] = {}
        self.acknowledged: set[str] = set()

    async def searches(self) -> None:
        i = 0
        while not self.stop.is_set():
            t = time.perf_counter()
            r = await self.http.post("/v1/search", json={"collection": COLLECTION, "top_k": 10,
                                                         "query": self.queries[i % len(self.queries)]})
            i += 1
            if r.status_code != 200:
                self.errors.append(f"{r.status_code}: {r.text[:200]}")
                continue
            took = time.perf_counter() - t
            self.latencies.append(took)
            body = r.json()
            self.degraded += int(body["degraded"])
            self.modes[body["mode"]] = self.modes.get(body["mode"], 0) + 1
            try:  # live traffic at a steady rate, not a closed loop starving the build
                await asyncio.wait_for(self.stop.wait(), max(0.0, self.search_every_s - took))
            except TimeoutError:
                pass

    async def writes(self) -> None:
        n = 0
        while not self.stop.is_set() and n < self.max_writes:
            doc = Document(id=f"{self.phase}-{n}", text=product(50_000 + n).text + f" ({self.phase} 쓰기 {n})",
                           payload={"kind": self.phase})
            try:
                await self.retrieval[n % len(self.retrieval)].upsert(COLLECTION, [doc], timeout_s=30)
                self.acknowledged.add(doc.id)
            except MeshClientError as exc:
                if exc.code == grpc.StatusCode.FAILED_PRECONDITION and "reader" in exc.message:
                    self.refused += 1
                else:
                    self.errors.append(f"write {doc.id}: {exc}")
            except Exception as exc:  # noqa: BLE001 - a refused write is counted, not acknowledged
                self.errors.append(f"write {doc.id}: {exc}")
            n += 1
            try:
                await asyncio.wait_for(self.stop.wait(), self.write_every_s)
            except TimeoutError:
                pass

    async def run_until(self, work) -> Any:
        """Traffic while ``work`` (a coroutine) runs; returns its result."""
        tasks = [asyncio.ensure_future(self.searches()), asyncio.ensure_future(self.writes())]
        try:
            return await work
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)

    def summary(self) -> dict[str, Any]:
        return {"searches": len(self.latencies), "keyword_only": self.degraded, "modes": self.modes,
                "search_ms": LatencyStats.of(self.latencies).__dict__ if self.latencies else None,
                "writes_acknowledged": len(self.acknowledged), "writes_refused_by_readers": self.refused,
                "errors": self.errors[:10],
                "error_count": len(self.errors)}


async def stored(retrieval: AsyncRetrievalClient, tag: str) -> set[str]:
    """Ids of the documents written with phase ``tag`` that the collection holds now."""
    out = await retrieval.search(COLLECTION, "쓰기", top_k=100, mode="keyword",
                                 filter=Filter(must=[Condition("kind", eq=tag)]), timeout_s=30)
    return {h.id for h in out.hits}


async def wait_job(http: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job once it ended."""
    while True:
        job = (await http.get(f"/v1/jobs/{job_id}")).json()
        if job["state"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.5)


async def readers_live(writer: AsyncRetrievalClient, readers: list[AsyncRetrievalClient]) -> bool:
    """Whether every reader describes the writer's live version (after their metadata TTL)."""
    await asyncio.sleep(1.5)
    live = (await writer.get_collection(COLLECTION, timeout_s=30)).embedding_revision
    seen = [(await r.get_collection(COLLECTION, timeout_s=30)).embedding_revision for r in readers]
    return all(revision == live for revision in seen)


async def scenario(gw: str, ret: str, docs: list[Document], gate: list[dict[str, Any]], revisions: dict[str, str],
                   searches_before: int, readers: list[str] | None = None) -> dict[str, Any]:
    """Ingest, searches before, bad input, the two upgrades with traffic, writes, the rollback: the figures."""
    out: dict[str, Any] = {}
    queries = [q["query"] for q in gate]
    async with httpx.AsyncClient(base_url=gw, timeout=60) as http, AsyncRetrievalClient(ret, timeout_s=60) as rc, \
            AsyncExitStack() as stack:
        replicas = [await stack.enter_async_context(AsyncRetrievalClient(t, timeout_s=60)) for t in readers or []]
        writers = [rc, *replicas]
        r = await http.post("/v1/collections", json={"name": COLLECTION, "fields": {"kind": "keyword"}})
        assert r.status_code == 201, r.text
        t = time.perf_counter()
        for i in range(0, len(docs), 64):
            await rc.upsert(COLLECTION, docs[i:i + 64], timeout_s=300)
        out["ingest_s"] = time.perf_counter() - t
        info = (await http.get(f"/v1/collections/{COLLECTION}")).json()
        out["documents"] = info["documents"]
        print(f"[bench] ingested {info['documents']} documents in {out['ingest_s']:.0f} s", flush=True)
        for q in queries:  # warm-up, excluded: every query once (its vector then comes from the cache, as during)
            await http.post("/v1/search", json={"collection": COLLECTION, "query": q, "top_k": 10})
        before = []
        for i in range(searches_before):
            t = time.perf_counter()
            r = await http.post("/v1/search", json={"collection": COLLECTION, "query": queries[i % len(queries)],
                                                    "top_k": 10})
            before.append(time.perf_counter() - t)
            assert r.status_code == 200 and not r.json()["degraded"], r.text
        out["before_ms"] = LatencyStats.of(before).__dict__
        # Bad input, answered before any work.
        bad_rev = await http.post(f"/v1/collections/{COLLECTION}/upgrade", json={"embedding_revision": "no-such"})
        bad_gate = await http.post(f"/v1/collections/{COLLECTION}/upgrade", json={
            "embedding_revision": revisions["fp32"], "gate": {"queries": [{"query": "x", "relevant_ids": ["nope"]}]}})
        nothing = await http.post(f"/v1/collections/{COLLECTION}/rollback")
        out["bad_input"] = {"unknown_revision": bad_rev.status_code, "gate_unknown_documents": bad_gate.status_code,
                            "rollback_nothing_kept": nothing.status_code}
        for phase, target in (("use", revisions["use"]), ("fp32", revisions["fp32"])):
            traffic = Traffic(http, writers, queries, phase)

            async def upgrade(target=target) -> dict[str, Any]:
                t = time.perf_counter()
                r = await http.post(f"/v1/collections/{COLLECTION}/upgrade", json={
                    "embedding_revision": target, "gate": {"queries": gate, "margin": MARGIN}, "batch_size": 64})
                assert r.status_code == 202, r.text
                job = await wait_job(http, r.json()["id"])
                job["took_s"] = time.perf_counter() - t
                return job

            print(f"[bench] upgrade to {phase} ({target}) ...", flush=True)
            job = await traffic.run_until(upgrade())
            info = (await http.get(f"/v1/collections/{COLLECTION}")).json()
            kept = await stored(rc, phase)
            out[phase] = {"job": {k: job[k] for k in ("state", "errors", "result", "took_s")},
                          "traffic": traffic.summary(), "revision_after": info["embedding_revision"],
                          "writes_lost": sorted(traffic.acknowledged - kept), "writes_found": len(kept),
                          "readers_live": await readers_live(rc, replicas) if replicas else None}
            print(f"[bench] {phase}: {json.dumps(out[phase], ensure_ascii=False)[:600]}", flush=True)
        # Writes after the swap (kept in both versions), then the rollback.
        after = Traffic(http, writers, queries, "after", write_every_s=0.2, max_writes=20)

        async def some_writes() -> None:
            await asyncio.sleep(5)

        await after.run_until(some_writes())
        t = time.perf_counter()
        r = await http.post(f"/v1/collections/{COLLECTION}/rollback")
        rollback_s = time.perf_counter() - t
        body = r.json()
        searches = []
        for q in queries[:20]:
            s = (await http.post("/v1/search", json={"collection": COLLECTION, "query": q, "top_k": 10})).json()
            searches.append(s["degraded"])
        kept = await stored(rc, "after")
        out["rollback"] = {"status": r.status_code, "client_s": rollback_s, "took_ms": body.get("took_ms"),
                           "revision_after": body.get("collection", {}).get("embedding_revision"),
                           "searches_after": len(searches), "keyword_only_after": sum(searches),
                           "writes_since_upgrade": len(after.acknowledged),
                           "writes_lost": sorted(after.acknowledged - kept),
                           "traffic_before": after.summary(),
                           "readers_live": await readers_live(rc, replicas) if replicas else None}
        print(f"[bench] rollback: {json.dumps(out['rollback'], ensure_ascii=False)[:600]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    """Start the mesh, run the three phases, write model_upgrade.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.model_upgrade", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="shared data folder (autorag-ko, klue-sts)")
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--gate-queries", type=int, default=200)
    parser.add_argument("--searches-before", type=int, default=60)
    parser.add_argument("--retrieval-readers", type=int, default=0,
                        help="reader replicas beside the retrieval writer (0: one retrieval instance)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    from bench.second_encoder import REVISION as USE_REVISION
    from bench.second_encoder import fetch

    fetch()
    judged, gate = judged_sets(args.data, args.gate_queries)
    docs = judged + [product(i) for i in range(max(0, args.docs - len(judged)))]
    for d in docs[len(judged):]:
        d.payload["kind"] = "product"
    procs = []
    started = time.perf_counter()
    try:
        e5, e5_port = start_service("services.embedding")
        procs.append(e5)
        fp32, fp32_port = start_service("services.embedding", "--precision", "fp32", "--revision-label", "fp32")
        procs.append(fp32)
        use, use_port = start_service("bench.use_embedding")
        procs.append(use)
        more = f"127.0.0.1:{fp32_port},127.0.0.1:{use_port}"
        with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as tmp:
            reader_ports = [free_port() for _ in range(args.retrieval_readers)]
            common = ("--qdrant-location", str(Path(tmp) / "q"), "--embedding-target", f"127.0.0.1:{e5_port}",
                      "--more-embedding-targets", more, "--rollback-grace-s", "900")
            ret, ret_port = (start_service("bench.retrieval_replicas", "--reader-ports",
                                           ",".join(map(str, reader_ports)), *common) if reader_ports
                             else start_service("services.retrieval", *common))
            procs.append(ret)
            search_port = reader_ports[0] if reader_ports else ret_port
            gw, gw_port = start_service("gateway", "--embedding-target", f"127.0.0.1:{e5_port}",
                                        "--more-embedding-targets", more, "--retrieval-target",
                                        f"127.0.0.1:{search_port}", "--retrieval-writer-target",
                                        f"127.0.0.1:{ret_port}", "--default-timeout-ms", "10000")
            procs.append(gw)
            revisions = asyncio.run(_revisions(f"127.0.0.1:{ret_port}"))
            revisions["use"] = USE_REVISION
            out = asyncio.run(scenario(f"http://127.0.0.1:{gw_port}", f"127.0.0.1:{ret_port}", docs, gate,
                                       revisions, args.searches_before, [f"127.0.0.1:{p}" for p in reader_ports]))
    finally:
        for p in reversed(procs):
            stop_service(p)
    out.update(revisions=revisions, gate_queries=len(gate), docs=len(docs), margin=MARGIN,
               wall_s=time.perf_counter() - started, retrieval_readers=args.retrieval_readers)
    report(args, argv, out)


async def _revisions(target: str) -> dict[str, str]:
    async with AsyncRetrievalClient(target) as rc:
        served = [r.revision for r in await rc.list_revisions(timeout_s=30)]
    return {"int8": served[0], "fp32": next(r for r in served if r.endswith("+fp32"))}


def report(args: argparse.Namespace, argv: list[str] | None, out: dict[str, Any]) -> None:
    """Markdown and JSON."""
    def gate_row(phase: str) -> list[str]:
        p = out[phase]
        g = (p["job"]["result"] or {}).get("gate") or {}
        return [phase, p["job"]["state"], f"{g.get('old_recall', 0):.4f}", f"{g.get('new_recall', 0):.4f}",
                f"{g.get('old_ndcg', 0):.4f}", f"{g.get('new_ndcg', 0):.4f}", "passed" if g.get("passed") else
                "refused", p["revision_after"], f"{p['job']['took_s']:.0f}"]

    def traffic_row(phase: str) -> list[str]:
        p = out[phase]
        t = p["traffic"]
        ms = t["search_ms"] or {"p50": float("nan"), "p95": float("nan")}
        return [phase, str(t["searches"]), str(t["keyword_only"]), f"{ms['p50']:.1f}", f"{ms['p95']:.1f}",
                f"{ms['p50'] / out['before_ms']['p50']:.2f}", str(t["writes_acknowledged"]),
                str(t.get("writes_refused_by_readers", 0)), str(len(p["writes_lost"])), str(t["error_count"]),
                {None: "-", True: "yes", False: "NO"}[p.get("readers_live")]]

    rb = out["rollback"]
    body = [
        f"- {out['docs']} documents ({out['documents']} stored): autorag-ko pages and KLUE-STS sentences (the judged "
        f"sets) and synthetic Korean product texts; gate: {out['gate_queries']} judged queries of those sets, "
        f"dense mode, margin {out['margin']} (seed 000). Revisions: int8 `{out['revisions']['int8']}`, fp32 "
        f"`{out['revisions']['fp32']}`, USE `{out['revisions']['use']}`.",
        "- Searches through the gateway, one every 200 ms (hybrid, the gate's queries, each seen once before the "
        "figures: query vectors from the gateway's cache, but not after a swap to another model), writes to "
        "retrieval every second (acknowledged when the call returns), both throughout each upgrade; the mesh as "
        "processes on this machine's two cores, so the build competes with the searches for them.",
        *([f"- Retrieval as one writer and {out['retrieval_readers']} readers (bench/retrieval_replicas.py, one "
            "process over one embedded store): the gateway searches through a reader and sends catalog work to the "
            "writer; writes go round-robin to every replica (readers refuse theirs, never acknowledged)."]
          if out.get("retrieval_readers") else []),
        f"- Ingest of the collection (e5 int8): {out['ingest_s']:.0f} s. Search before any upgrade: p50 "
        f"{out['before_ms']['p50']:.1f} ms, p95 {out['before_ms']['p95']:.1f} ms (n={out['before_ms']['n']}).",
        "", "Gate (both versions' figures from the job's `result.gate`):", "",
        md_table(["upgrade to", "job", "old recall@10", "new recall@10", "old nDCG@10", "new nDCG@10", "gate",
                  "revision after", "job s"], [gate_row("use"), gate_row("fp32")]),
        "", "During each upgrade:", "",
        md_table(["upgrade to", "searches", "keyword-only", "p50 ms", "p95 ms", "p50 / before", "writes acknowledged",
                  "writes refused by readers", "writes lost", "errors", "every reader on the live version"],
                 [traffic_row("use"), traffic_row("fp32")]),
        "", f"Rollback after the fp32 swap: HTTP {rb['status']}, {rb['client_s'] * 1e3:.1f} ms at the client "
        f"({rb['took_ms']} ms in the gateway); the collection holds revision `{rb['revision_after']}` again; "
        f"{rb['writes_since_upgrade']} writes acknowledged between the swap and the rollback, {len(rb['writes_lost'])} "
        f"missing after it; {rb['keyword_only_after']} of {rb['searches_after']} searches after it keyword-only"
        + ("." if rb.get("readers_live") is None else
           f"; every reader on the live version after it: {'yes' if rb['readers_live'] else 'NO'}."),
        "", f"Bad input: unknown revision → {out['bad_input']['unknown_revision']}, a gate naming unknown documents → "
        f"{out['bad_input']['gate_unknown_documents']}, rollback with nothing kept → "
        f"{out['bad_input']['rollback_nothing_kept']}.", "", f"Run time {out['wall_s']:.0f} s.",
    ]
    name = "model_upgrade_replicas" if out.get("retrieval_readers") else "model_upgrade"
    write_result(name, "Changing the embedding model of a live collection", body, out, out=args.out,
                 command=command_line("bench.model_upgrade", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
