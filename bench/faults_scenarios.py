"""The fault suite's scenarios, each under bounded load (fixed counts and durations) against a :class:`FaultMesh`.

Every function returns a plain dict of what it measured (json-ready); :mod:`bench.faults` runs them
and writes the table. Nothing here is tuned: counts, concurrencies and outage lengths are fixed by
the issue's wording (c=8, a few hundred requests; c=64) and by what two shared cores finish in
minutes.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import psutil

from bench import faults_corpus as corpus
from bench import faults_grpc
from bench.faults_mesh import QUICK_CHAT, FaultMesh, request_counts, wait_until
from bench.load import LoadResult, Request, run_load
from services.runtime.processes import stop_process

ITEMS = ["무선 이어폰", "캠핑 테이블", "거위털 패딩", "텀블러", "그림 동화책", "데이터 분석 입문서", "여행 가이드북",
         "커피 그라인더", "러닝화", "전기 주전자", "노트북 거치대", "가습기", "요가 매트", "블루투스 스피커"]
QUERIES = ["부모님 선물로 좋은 가습기", "캠핑 갈 때 쓸 탁자", "출퇴근용 무선 이어폰", "초보자를 위한 데이터 분석 책",
           "겨울에 입을 따뜻한 패딩", "사무실에서 쓸 조용한 커피 그라인더", "제주도 여행 가이드북", "가벼운 러닝화"]
JOB_DEADLINE_S = 180.0  # the suite's deadline for any one ingest or reindex job to end
SEARCH_DEADLINE_S = 2.0  # the gateway's default search deadline (--default-timeout-ms 2000)


def product(i: int, prefix: str = "p") -> dict[str, Any]:
    """A synthetic Korean product document (~100 characters) written for this suite."""
    item = ITEMS[i % len(ITEMS)]
    return {"id": f"{prefix}{i}", "text": f"{item} {i}호. {item}을 찾는 분께 추천합니다. 매일 쓰기 좋고 배송이 빠르며 "
            f"후기 평점이 높은 {item} 모델입니다.", "payload": {"price": 1000 + i}}


def search(i: int, collection: str = "shop") -> Request:
    """The i-th search of a load: a query never asked before (no cache hit), so every hop works."""
    return "POST", "/v1/search", {"json": {"collection": collection, "query": f"{QUERIES[i % len(QUERIES)]} {i}번"}}


def wait_job(http: httpx.Client, job_id: str, timeout_s: float = JOB_DEADLINE_S) -> tuple[dict[str, Any], float]:
    """Poll a job until it ends or ``timeout_s`` passes; its last view and the seconds it took."""
    t = time.perf_counter()
    job: dict[str, Any] = {}
    while time.perf_counter() - t < timeout_s:
        try:
            job = http.get(f"/v1/jobs/{job_id}").json()
        except (httpx.HTTPError, ValueError):
            job = {"state": "unreachable"}
        if job.get("state") in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    return job, time.perf_counter() - t


def create_with(http: httpx.Client, name: str, docs: list[dict[str, Any]], batch: int = 64) -> None:
    """A collection holding ``docs`` (waits for the ingest to finish)."""
    r = http.post("/v1/collections", json={"name": name, "fields": {"price": "integer"}})
    assert r.status_code == 201, r.text
    for start in range(0, len(docs), 2000):
        r = http.post(f"/v1/collections/{name}/documents", json={"documents": docs[start:start + 2000],
                                                                 "batch_size": batch})
        assert r.status_code == 202, r.text
        job, _ = wait_job(http, r.json()["id"])
        assert job["state"] == "succeeded", job


def documents(http: httpx.Client, name: str) -> int:
    """How many documents a collection holds."""
    return int(http.get(f"/v1/collections/{name}").json()["documents"])


def prepare(mesh: FaultMesh, shop_docs: int) -> None:
    """The collections the load and the corpus use."""
    with httpx.Client(base_url=mesh.base, timeout=60) as http:
        create_with(http, "shop", [product(i) for i in range(shop_docs)])
        create_with(http, corpus.SCRATCH, [product(i, "b") for i in range(20)])


# ---- 1: kill -9 and SIGSTOP under load ----------------------------------------------------------
def _recovered(mesh: FaultMesh, name: str, png: str) -> bool:
    with httpx.Client(base_url=mesh.base, timeout=10) as http:
        if name == "embedding":
            r = http.post("/v1/search", json={"collection": "shop", "query": f"회복 확인 {time.time()}"})
            return r.status_code == 200 and r.json()["mode"] == "hybrid" and not r.json()["degraded"]
        if name == "retrieval":
            return http.post("/v1/search", json={"collection": "shop", "query": "회복 확인"}).status_code == 200
        if name == "redis":  # the job store answers again
            return http.get("/v1/jobs/" + "0" * 32).status_code == 404
        return http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": png}]}).status_code == 202


def kill_or_stop(mesh: FaultMesh, name: str, how: str, *, n: int, rate_per_s: float, fault_at_s: float,
                 outage_s: float, png: str) -> dict[str, Any]:
    """``how`` = kill (SIGKILL, then start again) or stop (SIGSTOP, then SIGCONT) ``name`` during a c=8 search load."""
    timeline: dict[str, Any] = {}

    def fault() -> None:
        time.sleep(fault_at_s)
        mesh.kill(name, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        time.sleep(outage_s)
        t = time.perf_counter()
        if how == "kill":
            timeline["start_s"] = round(mesh.start(name), 2)
        else:
            mesh.kill(name, signal.SIGCONT)
        waited = wait_until(lambda: _recovered(mesh, name, png), 120.0)
        timeline["recovery_s"] = None if waited is None else round(time.perf_counter() - t, 2)

    thread = threading.Thread(target=fault)
    thread.start()
    load = run_load(mesh.base, n, 8, search, rate_per_s=rate_per_s, timeout_s=30)
    thread.join()
    no_retry_after = sum(o.status in (429, 503) and not o.retry_after for o in load.outcomes)
    return {"service": name, "fault": "kill -9" if how == "kill" else "SIGSTOP/SIGCONT", "requests": n,
            "statuses": load.counts(), "plain_5xx": load.plain_5xx(), "429_503_without_retry_after": no_retry_after,
            **timeline}


# ---- 2: gateway SIGTERM with slow calls in flight -----------------------------------------------
def gateway_sigterm(mesh: FaultMesh, *, chats: int = 8, searches: int = 8) -> dict[str, Any]:
    """Slow chats (first token after 2 s) and searches held by a frozen retrieval, then SIGTERM to the gateway."""
    mesh.standin.script = [{"chunks": ["천천히", " 답합니다"], "first_delay_s": 2.0}]
    mesh.kill("retrieval", signal.SIGSTOP)
    result: dict[str, LoadResult] = {}

    def make(i: int) -> Request:
        if i % 2 == 0:
            return "POST", "/v1/chat", {"json": {"session_id": f"s{i}", "message": "안녕하세요"}}
        return "POST", "/v1/search", {"json": {"collection": "shop", "query": f"느린 검색 {i}"},
                                      "headers": {"X-Request-Timeout-Ms": "30000"}}

    thread = threading.Thread(target=lambda: result.setdefault("load", run_load(
        mesh.base, chats + searches, chats + searches, make, timeout_s=40)))
    try:
        thread.start()
        time.sleep(1.0)  # every call is in flight: chats wait for their first token, searches for retrieval
        gw = mesh.procs["gateway"]
        t = time.perf_counter()
        gw.send_signal(signal.SIGTERM)
        code = gw.wait(30)
        exit_s = time.perf_counter() - t
        thread.join()
    finally:
        mesh.kill("retrieval", signal.SIGCONT)
        mesh.standin.script = [QUICK_CHAT]
    stop_process(gw, 2.0)
    mesh.start("gateway")
    outcomes: Counter[str] = Counter()
    for i, o in enumerate(result["load"].outcomes):
        kind = "chat" if i % 2 == 0 else "search"
        if o.status == 200:
            label = "200" + ("" if o.stream_done in (None, True) else " cut (no done event)")
        elif o.status == 503:
            label = "503 + Retry-After" if o.retry_after else "503 without Retry-After"
        else:
            label = o.key + (" (plain text)" if o.plain_5xx else "")
        outcomes[f"{kind}: {label}"] += 1
    bad = sum(v for k, v in outcomes.items() if not k.endswith(("200", "503 + Retry-After")))
    return {"in_flight": chats + searches, "outcomes": dict(sorted(outcomes.items())), "bad": bad,
            "exit_code": code, "exit_s": round(exit_s, 2)}


# ---- 3: ingest during reindex ------------------------------------------------------------------
def ingest_during_reindex(mesh: FaultMesh, *, rounds: int, base_docs: int, new_docs: int) -> dict[str, Any]:
    """Start a reindex, then an ingest job at once; acknowledged documents must all be in the collection."""
    out: list[dict[str, Any]] = []
    with httpx.Client(base_url=mesh.base, timeout=60) as http:
        for r in range(rounds):
            name = f"race{r}"
            create_with(http, name, [product(i) for i in range(base_docs)])
            reindex = http.post(f"/v1/collections/{name}/reindex").json()
            ingest = http.post(f"/v1/collections/{name}/documents", json={
                "documents": [product(i, "n") for i in range(new_docs)], "batch_size": 8}).json()
            overlapped = False
            t = time.perf_counter()
            while time.perf_counter() - t < JOB_DEADLINE_S:
                ri, ij = (http.get(f"/v1/jobs/{reindex['id']}").json(), http.get(f"/v1/jobs/{ingest['id']}").json())
                overlapped |= ri["state"] == "running" and ij["done"] > 0
                if ri["state"] in ("succeeded", "failed") and ij["state"] in ("succeeded", "failed"):
                    break
                time.sleep(0.05)
            holds = documents(http, name)
            acked = int(ij["done"])
            out.append({"round": r, "reindex": ri["state"], "ingest": ij["state"], "acknowledged": acked,
                        "ingest_errors": ij.get("errors", [])[:3], "holds": holds, "expected": base_docs + acked,
                        "lost": max(0, base_docs + acked - holds), "overlapped": overlapped,
                        "ended_in_s": round(time.perf_counter() - t, 1)})
    return {"rounds": out, "lost": sum(r["lost"] for r in out),
            "unfinished": sum(r["reindex"] not in ("succeeded", "failed") or r["ingest"] not in ("succeeded", "failed")
                              for r in out),
            "overlapped_rounds": sum(r["overlapped"] for r in out)}


# ---- 4: retrieval killed during a reindex ------------------------------------------------------
def retrieval_killed_in_reindex(mesh: FaultMesh, *, docs: int) -> dict[str, Any]:
    """Kill -9 retrieval while a reindex job runs, start it again: the catalog serves, unchanged; the job ends."""
    with httpx.Client(base_url=mesh.base, timeout=60) as http:
        create_with(http, "crash", [product(i) for i in range(docs)])
        before = documents(http, "crash")
        job_id = http.post("/v1/collections/crash/reindex").json()["id"]
        under_way = wait_until(lambda: http.get(f"/v1/jobs/{job_id}").json()["done"] >= docs // 4, 120, 0.05)
        mesh.kill("retrieval")
        killed_at = time.perf_counter()
        restart_s = mesh.start("retrieval")
        job, _ = wait_job(http, job_id)
        job_end_s = time.perf_counter() - killed_at
        serves = http.post("/v1/search", json={"collection": "crash", "query": "캠핑 테이블"}).status_code
        after = documents(http, "crash")
        again, _ = wait_job(http, http.post("/v1/collections/crash/reindex").json()["id"])
    return {"docs": docs, "killed_mid_reindex": under_way is not None, "restart_s": round(restart_s, 2),
            "job_state": job.get("state"), "job_errors": job.get("errors", [])[:2], "job_ended_s": round(job_end_s, 1),
            "search_status": serves, "documents_before": before, "documents_after": after,
            "next_reindex": again.get("state")}


# ---- 5: gateway killed mid-ingest, a second gateway on the same Redis -----------------------------
def gateway_killed_mid_ingest(mesh: FaultMesh, *, docs: int) -> dict[str, Any]:
    """The job runs on gateway A; B starts; A is killed (SIGKILL); B resumes the job from its last batch."""
    with httpx.Client(base_url=mesh.base, timeout=60) as http:
        r = http.post("/v1/collections", json={"name": "durable"})
        assert r.status_code == 201, r.text
        job_id = http.post("/v1/collections/durable/documents", json={
            "documents": [product(i, "d") for i in range(docs)], "batch_size": 8}).json()["id"]
        wait_until(lambda: http.get(f"/v1/jobs/{job_id}").json()["done"] >= 40, 60, 0.05)
    second, url = mesh.start_second_gateway()
    with httpx.Client(base_url=mesh.base, timeout=10) as http:
        done_at_kill = http.get(f"/v1/jobs/{job_id}").json()["done"]
    mesh.kill("gateway")
    with httpx.Client(base_url=url, timeout=60) as http:
        job, took = wait_job(http, job_id)
        holds = documents(http, "durable")
    mesh.start("gateway")
    mesh.extra.remove(second)
    stop_process(second)
    return {"docs": docs, "done_at_kill": done_at_kill, "job_state": job.get("state"), "done": job.get("done"),
            "holds": holds, "lost": max(0, docs - holds) if job.get("state") == "succeeded" else docs - holds,
            "ended_in_s": round(took, 1)}


# ---- 6: overload ------------------------------------------------------------------------------
def overload(mesh: FaultMesh, *, n: int, concurrency: int = 64) -> dict[str, Any]:
    """c=64 searches for a fixed count: 200 within 2x the deadline, or 429 with Retry-After, nothing else."""
    since = len(mesh.gateway_lines)
    load = run_load(mesh.base, n, concurrency, search, timeout_s=30)
    time.sleep(0.5)  # the last access lines are in
    served = [rec for rec in mesh.access_lines(since) if rec.get("route") == "/v1/search"]
    served_ms = sorted(float(rec["latency_ms"]) for rec in served)
    ok = [o for o in load.outcomes if o.status == 200 and o.latency_s <= 2 * SEARCH_DEADLINE_S]
    shed = [o for o in load.outcomes if o.status == 429 and o.retry_after]
    lat = sorted(o.latency_s for o in load.outcomes if o.status == 200)
    return {"requests": n, "concurrency": concurrency, "statuses": load.counts(),
            "ok_within_2x_deadline": len(ok), "shed_429_retry_after": len(shed),
            "other": n - len(ok) - len(shed), "429_without_retry_after": sum(
                o.status == 429 and not o.retry_after for o in load.outcomes),
            "ok_share": round(len(ok) / n, 3), "shed_share": round(len(shed) / n, 3),
            "p50_200_ms": round(lat[len(lat) // 2] * 1e3, 1) if lat else None,
            "max_200_ms": round(lat[-1] * 1e3, 1) if lat else None, "wall_s": round(load.wall_s, 1),
            # the same requests as the gateway timed them (its access lines): client and machine noise excluded
            "gateway_max_ms": served_ms[-1] if served_ms else None,
            "gateway_over_2x_deadline": sum(ms > 2e3 * SEARCH_DEADLINE_S for ms in served_ms),
            # when (seconds into the load) the late ones were sent: at 0, a new connection's set-up
            "late_started_s": [round(o.started_s, 2) for o in load.outcomes
                               if o.status == 200 and o.latency_s > 2 * SEARCH_DEADLINE_S][:10],
            # what the gateway itself answered (its access lines), next to what the client saw
            "gateway_statuses": dict(sorted(Counter(str(rec.get("status")) for rec in served).items())),
            # requests the client got no answer to, with the client's error (a connection-level failure)
            "unanswered": load.failures(), "unanswered_count": n - load.answered()}


# ---- 7: bad-input corpus ----------------------------------------------------------------------
def bad_input(mesh: FaultMesh, png: str) -> dict[str, Any]:
    """Every REST route and gRPC method with bad input; every 5xx the gateway answered logged and counted."""
    openapi = httpx.get(f"{mesh.base}/openapi.json", timeout=10).json()
    rest, untemplated = corpus.rest_cases(openapi, png)
    out = corpus.CorpusResult(untemplated=untemplated)
    time.sleep(0.5)  # the access lines of earlier requests are in
    lines_before = len(mesh.gateway_lines)
    counted_before = request_counts(mesh.base)
    corpus.run_rest(mesh.base, rest, out)
    time.sleep(0.5)
    counted = request_counts(mesh.base)
    logged = mesh.access_statuses(lines_before)
    out.rest_5xx_logged = sum(v for k, v in logged.items() if k >= 500)
    out.rest_5xx_counted = sum(counted[k] - counted_before.get(k, 0) for k in counted if k >= 500)
    import base64

    calls = faults_grpc.grpc_cases(base64.b64decode(png))
    faults_grpc.run_grpc({n: mesh.target(n) for n in ("embedding", "retrieval", "reasoning", "ocr")}, calls, out)
    routes = sorted({c.route for c in rest})
    methods = sorted(set(faults_grpc.iter_cases(calls)))
    return {"rest_cases": out.rest_cases, "rest_routes": len(routes), "rest_statuses": dict(sorted(
        out.rest_statuses.items())), "rest_plain_5xx": len(out.rest_plain_5xx), "rest_json_500": len(out.rest_json_500),
        "rest_5xx_cases": (out.rest_plain_5xx + out.rest_json_500 + out.rest_json_5xx_other)[:20],
        "rest_5xx_seen": out.rest_5xx_seen, "rest_5xx_seen_logged_routes": out.rest_5xx_seen_logged_routes,
        "rest_5xx_logged": out.rest_5xx_logged, "rest_5xx_counted": out.rest_5xx_counted,
        "rest_slowest_s": round(out.rest_slowest_s, 2), "untemplated_routes": untemplated,
        "rest_unsent": out.rest_unsent,
        "grpc_cases": out.grpc_cases, "grpc_methods": len(methods), "grpc_codes": dict(sorted(out.grpc_codes.items())),
        "grpc_internal": len(out.grpc_internal), "grpc_internal_cases": out.grpc_internal[:20],
        "grpc_stalled": out.grpc_stalled[:20], "grpc_slowest_s": round(out.grpc_slowest_s, 2)}


# ---- 8: embedding RSS -------------------------------------------------------------------------
@dataclass
class Rss:
    """RSS of one process in MB."""

    pid: int

    def mb(self) -> float:
        """Resident set size now."""
        return psutil.Process(self.pid).memory_info().rss / 2**20


def embedding_rss(mesh: FaultMesh) -> dict[str, Any]:
    """RSS warm, after one max-size /v1/embeddings call (64 texts of ~2,400 characters), and 5 s later."""
    rss = Rss(mesh.pid("embedding"))
    model = "intfloat/multilingual-e5-small"
    with httpx.Client(base_url=mesh.base, timeout=120) as http:
        for i in range(10):
            assert http.post("/v1/embeddings", json={"input": [f"{q} {i}" for q in QUERIES[:4]],
                                                     "model": model}).status_code == 200
        warm = rss.mb()
        unit = "한국어 문장을 길게 이어 쓴 상품 설명입니다. 배송이 빠르고 품질이 좋습니다. "  # 40 characters
        texts = [(f"{i}번 " + unit * 60)[:2400] for i in range(64)]  # 2,400 characters each
        t = time.perf_counter()
        # A deadline long enough for the call to finish on one shared core: what is measured is the memory
        # of a served max-size request (the admin default, 30 s, is not always enough here).
        r = http.post("/v1/embeddings", content=json.dumps({"input": texts, "model": model}, ensure_ascii=False),
                      headers={"content-type": "application/json", "X-Request-Timeout-Ms": "110000"})
        took = time.perf_counter() - t
        after = rss.mb()
        time.sleep(5)
        later = rss.mb()
    return {"status": r.status_code, "chars_per_text": len(texts[0]), "texts": len(texts), "call_s": round(took, 2),
            "warm_mb": round(warm, 1), "after_mb": round(after, 1), "after_5s_mb": round(later, 1),
            "ratio_after": round(after / warm, 2), "ratio_5s": round(later / warm, 2)}


# ---- 9: clients that leave mid-stream ---------------------------------------------------------
STALLED_ANSWER = {"chunks": ['{"answerable": true, "answer": "무선 이어폰은', ' 출퇴근용입니다."',
                             ', "citations": [1]}'], "first_delay_s": 0.5, "stall_after": 1}


def leave_mid_stream(base: str, i: int, collection: str = "shop", question: str = "") -> str:
    """One streamed answer, dropped after its first text; what the client saw last (or ``status N``).

    Odd ``i``: a chat completion, left after its first content. Even: a grounded answer, shown only
    once whole and checked, so its client leaves after the passages, while the gateway waits for the LLM.
    """
    if i % 2:
        path, body = "/v1/chat/completions", {"model": "local", "stream": True,
                                              "messages": [{"role": "user", "content": f"안녕하세요 {i}"}]}
    else:
        path, body = "/v1/answers:stream", {"collection": collection, "min_score": 0,
                                            "question": question or f"{QUERIES[i % len(QUERIES)]} {i}"}
    with httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        with http.stream("POST", path, json=body) as r:  # closing the response closes the socket
            if r.status_code != 200:
                return f"status {r.status_code}"
            event = ""
            for line in r.iter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and (event == "passages"
                                                   or '"content": "' in line and '"content": ""' not in line):
                    return event or "content"
    return "ended"


def _in_flight(base: str) -> float:
    """The gateway's ring slots held now, over every route and instance."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("mesh_gateway_reasoning_in_flight{"))


def disconnect_storm(mesh: FaultMesh, *, n: int = 200, after: int = 100, concurrency: int = 10) -> dict[str, Any]:
    """``n`` clients leave mid-stream (answers and chat completions, the LLM slow), then ``after`` requests."""
    from concurrent.futures import ThreadPoolExecutor

    mesh.standin.script[:] = [STALLED_ANSWER]
    try:
        t = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            seen = Counter(pool.map(lambda i: leave_mid_stream(mesh.base, i), range(n)))
        storm_s = time.perf_counter() - t
    finally:
        mesh.standin.script[:] = [QUICK_CHAT]
    freed_s = wait_until(lambda: _in_flight(mesh.base) == 0, timeout_s=30.0)
    held = _in_flight(mesh.base)
    load = run_load(mesh.base, after, concurrency, lambda i: (
        "POST", "/v1/chat/completions", {"json": {"model": "local", "messages": [
            {"role": "user", "content": f"질문 {i}"}]}}), timeout_s=30)
    return {"clients": n, "left_after": dict(seen), "storm_s": round(storm_s, 1),
            "slots_freed_after_s": None if freed_s is None else round(freed_s, 2), "slots_held_after": held,
            "after_requests": after, "after_statuses": load.counts(), "after_ok": load.counts().get("200", 0)}
