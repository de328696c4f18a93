"""The Redis job store under a full database and under a gateway killed mid-ingest.

    python -m bench.jobs_store [--cycles 50] [--cached-vectors 100000] [--jobs 30] [--docs-per-job 40]
                               [--out bench/results/jobs_store]

(a) Orphan checks in a crowded database: :class:`~services.runtime.jobs.redis.RedisJobs` instances
    (in this process) on a fresh redis-server. One cycle is one ``RedisJobs.beat()`` (renew this
    instance's lease, requeue the jobs of lapsed instances). Over ``--cycles`` cycles, first with no other
    key and then with ``--cached-vectors`` keys shaped like the gateway's embedding cache in the same
    database (``emb:<revision>:query:<sha256>`` -> 384 float32, as ``gateway.vectors.cache.RedisCache``
    writes them), it counts the commands a cycle sends: as MONITOR sees them (commands a Lua script runs,
    ``client_type == "lua"``, apart) and as the server's ``INFO commandstats`` counts them (which includes
    the script's own calls), and times the cycle. Also one reaping cycle per setting: a lapsed instance
    holding jobs, requeued by a single beat. Target: commands per cycle equal within 10 %.
(b) A gateway killed under concurrent ingest: Redis, embedding, retrieval and ``--gateways`` gateways
    (``--redis-url``, short ``--job-lease-s``; OCR and reasoning targets point at ports nobody serves);
    a collection; ``--jobs`` ingest jobs of ``--docs-per-job`` small Korean documents (distinct ids,
    small batches) submitted round-robin at once; one gateway killed with SIGKILL once jobs are running;
    then every job is polled (bounded) until final. Figures: jobs succeeded / failed, documents
    acknowledged vs found in the collection, duplicate completions (job ids with more than one
    ``succeeded`` completion line in all gateways' logs), jobs resumed by another gateway (fence > 1).

Everything runs on loopback, with fixed counts and time limits, and stops by itself. Writes ``<out>.md``
and ``<out>.json`` with the machine's facts.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import ROOT, free_port, md_table, side_by_side
from bench.load import run_load
from bench.report import command_line, write_result
from services.runtime.processes import start_process, start_redis, stop_process

NAMESPACE_A = "benchjobs"
GATEWAY_NAMESPACE = "gateway"  # the namespace gateway/wiring.py gives its RedisJobs (a hash tag in the keys)
JOB_LOGGER = "services.runtime.jobs.base"
DIM = 384


def log(msg: str) -> None:
    """Progress on stderr."""
    print(f"[jobs_store] {msg}", file=sys.stderr, flush=True)


def embedding_revision() -> str:
    """The installed model's revision (what the gateway's cache keys carry), or a stand-in of the same shape."""
    try:
        from services.runtime.models import current_model_dir

        return str(json.loads((current_model_dir() / "manifest.json").read_text())["revision"])
    except Exception:  # noqa: BLE001 - only the key's shape matters here
        return "me5s-bench-000000000000"


def vector_key(revision: str, i: int) -> str:
    """A query-embedding cache key, as ``gateway.vectors.cache.cache_key`` builds it."""
    try:
        from gateway.vectors.cache import cache_key

        return cache_key(revision, "query", f"질의 {i}")
    except ImportError:  # the same shape, should the module move
        return f"emb:{revision}:query:{hashlib.sha256(f'질의 {i}'.encode()).hexdigest()}"


# ---- (a) commands per orphan-check cycle ----------------------------------------------------------
class MonitorCount:
    """MONITOR on its own connection (a thread): commands between two ECHO markers, Lua's apart."""

    def __init__(self, url: str, start: str, end: str, timeout_s: float) -> None:
        import redis

        self.start_marker, self.end_marker = start, end
        self.top: Counter[str] = Counter()
        self.lua: Counter[str] = Counter()
        self.ready = threading.Event()
        self.done = threading.Event()
        self.error = ""
        self._client = redis.Redis.from_url(url, socket_timeout=timeout_s)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        counting = False
        try:
            with self._client.monitor() as mon:
                self.ready.set()
                while True:
                    cmd = mon.next_command()
                    text = cmd.get("command", "")
                    if text == f"ECHO {self.start_marker}":
                        counting = True
                        continue
                    if text == f"ECHO {self.end_marker}":
                        break
                    if counting:
                        name = text.split(" ", 1)[0].upper()
                        (self.lua if cmd.get("client_type") == "lua" else self.top)[name] += 1
        except Exception as exc:  # noqa: BLE001 - reported as a figure
            self.error = f"{type(exc).__name__}: {exc}"
            self.ready.set()
        finally:
            self.done.set()
            self._client.close()

    def wait(self, timeout_s: float) -> None:
        """Until the end marker was seen (or ``timeout_s``)."""
        self._thread.join(timeout_s)


def commandstats(info: dict[str, Any], field: str = "calls") -> dict[str, int]:
    """``cmdstat_<name>`` -> calls (or ``usec``)."""
    return {k.removeprefix("cmdstat_"): int(v[field]) for k, v in info.items() if k.startswith("cmdstat_")}


async def measure_cycles(url: str, cycles: int, label: str) -> dict[str, Any]:
    """Beats of one instance among three live ones: commands (MONITOR, commandstats) and time per cycle."""
    import redis.asyncio as aioredis

    from services.runtime.jobs.redis import RedisJobs

    instances = [RedisJobs({}, url, NAMESPACE_A, lease_s=15.0) for _ in range(3)]
    admin = aioredis.from_url(url)
    try:
        for inst in instances:  # the scripts are loaded (EVALSHA -> NOSCRIPT -> SCRIPT LOAD) before counting
            await inst.beat()
            await inst._reap(keys=[inst.leases, inst.queue, inst.running_list("nobody")], args=["nobody", 0])
        probe = instances[0]
        # commandstats: the server's own count of every command (scripts' calls included)
        info_before = await admin.info("commandstats")
        times: list[float] = []
        for _ in range(cycles):
            t = time.perf_counter()
            await probe.beat()
            times.append(time.perf_counter() - t)
        info_after = await admin.info("commandstats")
        before, after = commandstats(info_before), commandstats(info_after)
        usec = commandstats(info_after, "usec").get("evalsha", 0) - commandstats(info_before, "usec").get("evalsha", 0)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        delta["info"] = delta.get("info", 0) - 1  # the first INFO itself is counted by the second
        delta = {k: v for k, v in delta.items() if v}
        evalsha_usec = round(usec / max(1, delta.get("evalsha", 0)), 2)  # the server's time per script run
        # MONITOR: what the client sends (top level) and what the script runs inside (lua)
        mon = MonitorCount(url, f"start-{label}", f"end-{label}", timeout_s=30)
        mon.ready.wait(10)
        await asyncio.sleep(0.2)  # MONITOR is registered before the first marker
        await probe.redis.echo(f"start-{label}")
        for _ in range(cycles):
            await probe.beat()
        await probe.redis.echo(f"end-{label}")
        await asyncio.to_thread(mon.wait, 30)
        # one reaping cycle: a lapsed instance holding 2 jobs, requeued by one beat of a live one
        lapsed = f"{probe.prefix}:running:lapsed-{label}"
        await admin.rpush(lapsed, "a" * 32, "b" * 32)
        await admin.zadd(probe.leases, {f"lapsed-{label}": 1})
        reap_mon = MonitorCount(url, f"rstart-{label}", f"rend-{label}", timeout_s=30)
        reap_mon.ready.wait(10)
        await asyncio.sleep(0.2)
        await probe.redis.echo(f"rstart-{label}")
        t = time.perf_counter()
        moved = await probe.beat()
        reap_s = time.perf_counter() - t
        await probe.redis.echo(f"rend-{label}")
        await asyncio.to_thread(reap_mon.wait, 30)
        await admin.delete(probe.queue)
        keys = await admin.dbsize()
    finally:
        for inst in instances:
            await inst.redis.aclose()
            await inst._blocking.aclose()
        await admin.aclose()
    ms = sorted(x * 1e3 for x in times)
    return {
        "db_keys": keys, "cycles": cycles,
        "monitor_commands_per_cycle": sum(mon.top.values()) / cycles,
        "monitor_commands": dict(mon.top), "monitor_lua_commands_per_cycle": sum(mon.lua.values()) / cycles,
        "monitor_lua_commands": dict(mon.lua), "monitor_error": mon.error,
        "commandstats_top_level_per_cycle": delta.get("evalsha", 0) / cycles,
        "commandstats_all_per_cycle": sum(v for k, v in delta.items() if k != "info") / cycles,
        "commandstats_delta": delta, "evalsha_usec_per_call": evalsha_usec,
        "cycle_ms_mean": round(statistics.fmean(ms), 3), "cycle_ms_p50": round(ms[len(ms) // 2], 3),
        "cycle_ms_p95": round(ms[int(len(ms) * 0.95) - 1], 3),
        "reap": {"moved": moved, "monitor_commands": dict(reap_mon.top), "monitor_lua_commands": dict(reap_mon.lua),
                 "ms": round(reap_s * 1e3, 3), "monitor_error": reap_mon.error},
    }


async def fill_cache(url: str, n: int) -> dict[str, Any]:
    """``n`` embedding-cache entries (384 float32 each, a day's TTL) in the database, pipelined."""
    import redis.asyncio as aioredis

    rng = np.random.default_rng(0)
    revision = embedding_revision()
    r = aioredis.from_url(url)
    t = time.perf_counter()
    try:
        for start in range(0, n, 5000):
            vectors = rng.standard_normal((min(5000, n - start), DIM), dtype=np.float32)
            async with r.pipeline(transaction=False) as pipe:
                for j, vec in enumerate(vectors):
                    pipe.set(vector_key(revision, start + j), vec.tobytes(), ex=86400)
                await pipe.execute()
        keys = await r.dbsize()
        memory = (await r.info("memory"))["used_memory"]
        sample = await r.randomkey()
        sample_len = await r.strlen(sample) if sample else 0
    finally:
        await r.aclose()
    example = sample.decode() if isinstance(sample, bytes) else str(sample or "")
    return {"written": n, "db_keys": keys, "used_memory_mb": round(memory / 2**20, 1), "value_bytes": sample_len,
            "key_example": example, "write_s": round(time.perf_counter() - t, 1)}


def part_a(folder: Path, cycles: int, vectors: int) -> dict[str, Any]:
    """(a): the same cycles on an empty database and on one holding ``vectors`` cache entries."""
    logging.getLogger("services.runtime.jobs.redis").setLevel(logging.ERROR)  # the reaping cycle's own warning
    proc, url = start_redis(folder / "redis-a")
    try:
        empty = asyncio.run(measure_cycles(url, cycles, "empty"))
        log(f"(a) empty db: {empty['monitor_commands_per_cycle']} command(s)/cycle, {empty['cycle_ms_mean']} ms")
        filled = asyncio.run(fill_cache(url, vectors))
        log(f"(a) wrote {vectors} cache entries in {filled['write_s']} s ({filled['used_memory_mb']} MB)")
        full = asyncio.run(measure_cycles(url, cycles, "full"))
        log(f"(a) full db: {full['monitor_commands_per_cycle']} command(s)/cycle, {full['cycle_ms_mean']} ms")
    finally:
        stop_process(proc, 5.0)

    def within(a: float, b: float) -> bool:
        return abs(a - b) <= 0.1 * max(a, b, 1e-9)

    return {"empty": empty, "cache": filled, "full": full,
            "commands_equal_within_10pct": within(empty["monitor_commands_per_cycle"],
                                                  full["monitor_commands_per_cycle"])
            and within(empty["commandstats_all_per_cycle"], full["commandstats_all_per_cycle"]),
            "cycle_time_ratio_full_vs_empty": round(full["cycle_ms_mean"] / empty["cycle_ms_mean"], 2)}


# ---- (b) gateways killed under concurrent ingest ---------------------------------------------------
WORDS = ["서울", "부산", "도서관", "커피", "노트북", "여행", "김치", "등산화", "사과", "우산", "자전거", "책상"]


def korean_doc(job: int, i: int) -> dict[str, Any]:
    """A small Korean document with an id unique across the run."""
    a, b = WORDS[(job + i) % len(WORDS)], WORDS[(3 * job + 7 * i) % len(WORDS)]
    return {"id": f"j{job:03d}-d{i:03d}", "text": f"{a}와 {b}에 관한 짧은 안내문 {job}-{i}번입니다.",
            "payload": {"job": job}}


class Gateways:
    """Redis, embedding, retrieval and N gateways; every gateway's output kept, line by line."""

    def __init__(self, folder: Path, n: int, lease_s: float, workers: int) -> None:
        self.folder, self.n, self.lease_s, self.workers = folder, n, lease_s, workers
        self.procs: list[subprocess.Popen] = []
        self.gateways: list[subprocess.Popen | None] = []
        self.urls: list[str] = []
        self.lines: list[list[str]] = [[] for _ in range(n)]
        self.redis_url = ""

    def start(self) -> dict[str, float]:
        """Everything; seconds each part took to serve."""
        took: dict[str, float] = {}
        t = time.perf_counter()
        redis_proc, self.redis_url = start_redis(self.folder / "redis-b")
        self.procs.append(redis_proc)
        quiet = ["--log-level", "WARNING"]
        emb, emb_port = start_process("services.embedding", "--port", "0", "--intra-op-threads", "1", *quiet)
        self.procs.append(emb)
        took["embedding_s"] = round(time.perf_counter() - t, 1)
        ret, ret_port = start_process("services.retrieval", "--port", "0", "--qdrant-location",
                                      str(self.folder / "q"), "--embedding-target", f"127.0.0.1:{emb_port}", *quiet)
        self.procs.append(ret)
        took["retrieval_s"] = round(time.perf_counter() - t, 1)
        unserved = [free_port(), free_port()]  # OCR and reasoning: nobody listens there (no job needs them)
        args = ["--embedding-target", f"127.0.0.1:{emb_port}", "--retrieval-target", f"127.0.0.1:{ret_port}",
                "--ocr-target", f"127.0.0.1:{unserved[0]}", "--reasoning-targets", f"127.0.0.1:{unserved[1]}",
                "--redis-url", self.redis_url, "--job-lease-s", str(self.lease_s), "--job-workers",
                str(self.workers), "--log-level", "INFO"]
        self.gateways = [None] * self.n
        self.urls = [""] * self.n

        def one(k: int) -> None:
            proc, port = start_process("gateway", "--port", "0", *args, echo=self.lines[k].append)
            self.gateways[k], self.urls[k] = proc, f"http://127.0.0.1:{port}"

        side_by_side(one, range(self.n))
        took["gateways_s"] = round(time.perf_counter() - t, 1)
        return took

    def kill(self, k: int) -> None:
        """SIGKILL gateway ``k`` (and whatever its group left)."""
        proc = self.gateways[k]
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        stop_process(proc, 2.0)

    def close(self) -> None:
        """Stop everything started here."""
        for proc in [*(g for g in self.gateways if g is not None), *reversed(self.procs)]:
            stop_process(proc, 10.0)

    def job_lines(self) -> list[dict[str, Any]]:
        """Every gateway's job completion lines (parsed), each with the gateway's index."""
        out = []
        for k, lines in enumerate(self.lines):
            for line in list(lines):
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("logger") == JOB_LOGGER and "job_id" in rec:
                    out.append({**rec, "gateway": k})
        return out

    def grep(self, needle: str) -> list[dict[str, Any]]:
        """Lines of any gateway containing ``needle`` (parsed where JSON)."""
        out = []
        for k, lines in enumerate(self.lines):
            for line in list(lines):
                if needle in line:
                    try:
                        out.append({"gateway": k, **json.loads(line)})
                    except ValueError:
                        out.append({"gateway": k, "line": line.strip()})
        return out


def part_b(folder: Path, *, gateways: int, jobs: int, docs_per_job: int, batch_size: int, lease_s: float,
           workers: int, kill_after_docs: int, deadline_s: float, redis_pause_s: float = 0.0) -> dict[str, Any]:
    """(b): concurrent ingest jobs over ``gateways`` gateways, one killed while they run.

    With ``redis_pause_s``, Redis is paused that long (``CLIENT PAUSE ... ALL``) instead; nobody is killed.
    """
    import redis

    mesh = Gateways(folder, gateways, lease_s, workers)
    out: dict[str, Any] = {"gateways": gateways, "jobs": jobs, "docs_per_job": docs_per_job,
                           "batch_size": batch_size, "job_lease_s": lease_s, "job_workers_per_gateway": workers}
    victim = -1 if redis_pause_s else 1 % gateways
    try:
        out["start"] = mesh.start()
        log(f"(b) mesh up: {out['start']}")
        r: Any = redis.Redis.from_url(mesh.redis_url, socket_timeout=5, decode_responses=True)
        prefix = f"jobs:{{{GATEWAY_NAMESPACE}}}"
        name = "jobs_store"
        with httpx.Client(base_url=mesh.urls[0], timeout=30) as http:
            resp = http.post("/v1/collections", json={"name": name})
            assert resp.status_code == 201, resp.text
        bodies = [{"documents": [korean_doc(j, i) for i in range(docs_per_job)], "batch_size": batch_size}
                  for j in range(jobs)]

        t0 = time.perf_counter()
        # request j goes to gateway j % gateways (round-robin)
        load = run_load(mesh.urls, jobs, min(jobs, 16), lambda j: (
            "POST", f"/v1/collections/{name}/documents", {"json": bodies[j]}), keep_body=True)
        submitted = [(j, j % gateways, {"status": o.key, **(o.body if o.status == 202 else
                                                            {"body": str(o.body or o.failure)[:300]})})
                     for j, o in enumerate(load.outcomes)]
        out["submit_s"] = round(time.perf_counter() - t0, 1)
        ids = {j: s["id"] for j, k, s in submitted if s["status"] == "202"}
        out["submitted_via"] = dict(Counter(str(k) for _j, k, _s in submitted))
        out["submit_statuses"] = dict(Counter(str(s["status"]) for _j, _k, s in submitted))
        log(f"(b) {len(ids)} jobs accepted in {out['submit_s']} s")

        survivors = [k for k in range(gateways) if k != victim]
        clients = {k: httpx.Client(base_url=mesh.urls[k], timeout=10) for k in range(gateways)}

        def views(keys: list[int]) -> dict[int, dict[str, Any]]:
            got: dict[int, dict[str, Any]] = {}
            for n, (j, job_id) in enumerate(sorted(ids.items())):
                k = keys[n % len(keys)]
                try:
                    got[j] = clients[k].get(f"/v1/jobs/{job_id}").json()
                except (httpx.HTTPError, ValueError) as exc:
                    got[j] = {"state": "unreachable", "error": type(exc).__name__}
            return got

        # kill the victim once jobs are running and some batches are in (bounded)
        t_kill_wait = time.perf_counter()
        while time.perf_counter() - t_kill_wait < 60:
            done = sum(int(v.get("done", 0)) for v in views(list(range(gateways))).values())
            if done >= kill_after_docs:
                break
            time.sleep(0.3)
        leases_before = {str(m): s for m, s in r.zrange(f"{prefix}:leases", 0, -1, withscores=True)}
        held = {inst: [str(x) for x in r.lrange(f"{prefix}:running:{inst}", 0, -1)] for inst in leases_before}
        at_kill = views(survivors)
        t_kill = time.perf_counter()
        if redis_pause_s:  # every client's commands wait: the gateways' job-store calls time out mid-job
            r.execute_command("CLIENT", "PAUSE", str(int(redis_pause_s * 1000)), "ALL")
        else:
            mesh.kill(victim)
        out["kill"] = {"gateway": victim, "after_s": round(t_kill - t0, 1), "redis_pause_s": redis_pause_s,
                       "done_docs_at_kill": sum(int(v.get("done", 0)) for v in at_kill.values()),
                       "states_at_kill": dict(Counter(v.get("state") for v in at_kill.values()))}
        log(f"(b) {'paused Redis' if redis_pause_s else f'killed gateway {victim}'} at {out['kill']['after_s']} s, "
            f"{out['kill']['states_at_kill']}")

        # wait (bounded) until every job is final
        final: dict[int, dict[str, Any]] = {}
        while time.perf_counter() - t_kill < deadline_s:
            final = views(survivors)
            if all(v.get("state") in ("succeeded", "failed") for v in final.values()):
                break
            time.sleep(1.0)
        out["all_final_after_kill_s"] = round(time.perf_counter() - t_kill, 1)
        out["wall_from_submit_s"] = round(time.perf_counter() - t0, 1)
        leases_after = {str(m) for m in r.zrange(f"{prefix}:leases", 0, -1)}
        lapsed = [inst for inst in leases_before if inst not in leases_after]
        victim_jobs = sorted({x for inst in lapsed for x in held[inst]})
        time.sleep(0.5)  # the last completion lines are in
        with httpx.Client(base_url=mesh.urls[survivors[0]], timeout=30) as http:
            found = int(http.get(f"/v1/collections/{name}").json()["documents"])
        for c in clients.values():
            c.close()
        fences = {j: int(r.get(f"{prefix}:job:{job_id}:fence") or 0) for j, job_id in ids.items()}
        queue_left = r.llen(f"{prefix}:queue")
        running_left = {str(k): r.llen(k) for k in r.scan_iter(f"{prefix}:running:*")}
        r.close()
    finally:
        mesh.close()

    lines = mesh.job_lines()
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in lines:
        by_job[rec["job_id"]].append(rec)
    succeeded_lines = Counter(rec["job_id"] for rec in lines if rec.get("job_state") == "succeeded")
    duplicates = {job_id: [{k: rec.get(k) for k in ("gateway", "timestamp", "job_state", "job_attempt")}
                           for rec in by_job[job_id]] for job_id, n in succeeded_lines.items() if n > 1}
    states = Counter(v.get("state") for v in final.values())
    acked = sum(int(v.get("done", 0)) for v in final.values() if v.get("state") == "succeeded")
    unfinished = {ids[j]: v for j, v in final.items() if v.get("state") not in ("succeeded", "failed")}
    resumed = {ids[j]: f for j, f in fences.items() if f > 1}
    id_to_j = {job_id: j for j, job_id in ids.items()}
    out.update({
        "jobs_accepted": len(ids), "states": dict(states), "succeeded": states.get("succeeded", 0),
        "failed": states.get("failed", 0), "unfinished": len(unfinished), "unfinished_jobs": unfinished,
        "failed_jobs": {ids[j]: v.get("errors") for j, v in final.items() if v.get("state") == "failed"},
        "documents_submitted": len(ids) * docs_per_job, "documents_acknowledged": acked,
        "documents_found": found, "documents_lost": max(0, acked - found),
        "completion_lines": len(lines), "completion_lines_by_gateway": dict(Counter(str(x["gateway"]) for x in lines)),
        "jobs_with_succeeded_line": len(succeeded_lines), "duplicate_completions": len(duplicates),
        "duplicate_completion_evidence": duplicates,
        "succeeded_without_completion_line": [ids[j] for j, v in final.items()
                                              if v.get("state") == "succeeded" and succeeded_lines[ids[j]] == 0],
        "victim_instances": lapsed, "victim_held_jobs_at_kill": len(victim_jobs), "victim_jobs": victim_jobs,
        "resumed_jobs": len(resumed), "resumed": resumed,
        "resumed_of_victim_jobs": sum(1 for x in victim_jobs if fences.get(id_to_j.get(x, -1), 0) > 1),
        "resumed_not_held_by_victim": sorted(set(resumed) - set(victim_jobs)),
        "completion_attempts": dict(Counter(str(rec.get("job_attempt")) for rec in lines
                                            if rec.get("job_state") == "succeeded")),
        "requeue_warnings": [{k: x.get(k) for k in ("gateway", "timestamp", "message")}
                             for x in mesh.grep("job(s) of lapsed instances")],
        "lease_lost_warnings": [{k: x.get(k) for k in ("gateway", "timestamp", "message")}
                                for x in mesh.grep("taken over by a later attempt")],
        "store_interruptions": len(mesh.grep("interrupted by the job store")),
        "queue_left": queue_left, "running_lists_left": running_left,
    })
    return out


# ---- report -------------------------------------------------------------------------------------
def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def rows(f: dict[str, Any]) -> list[list[str]]:
    """One row per figure: part, measure, result, target, met."""
    out: list[list[str]] = []
    a = f.get("a")
    if a and "error" not in a:
        e, full = a["empty"], a["full"]
        out.append([f"(a) commands per beat() (MONITOR, top level), {e['cycles']} cycles",
                    f"keys in the db: {e['db_keys']} / {full['db_keys']}",
                    f"{e['monitor_commands_per_cycle']:g} {e['monitor_commands']} / "
                    f"{full['monitor_commands_per_cycle']:g} {full['monitor_commands']}", "equal within 10 %",
                    _met(a["commands_equal_within_10pct"])])
        out.append(["(a) commands run inside the script per beat() (MONITOR, client_type lua)",
                    "empty / full",
                    f"{e['monitor_lua_commands_per_cycle']:g} / {full['monitor_lua_commands_per_cycle']:g}",
                    "equal", _met(e["monitor_lua_commands_per_cycle"] == full["monitor_lua_commands_per_cycle"])])
        out.append(["(a) INFO commandstats delta per beat() (all, Lua's included; EVALSHA)", "empty / full",
                    f"{e['commandstats_all_per_cycle']:g} (evalsha {e['commandstats_top_level_per_cycle']:g}) / "
                    f"{full['commandstats_all_per_cycle']:g} (evalsha {full['commandstats_top_level_per_cycle']:g})",
                    "equal within 10 %", _met(a["commands_equal_within_10pct"])])
        out.append(["(a) cycle time, client round trip (mean / p50 / p95 ms); server usec per EVALSHA",
                    "empty / full", f"{e['cycle_ms_mean']} / {e['cycle_ms_p50']} / {e['cycle_ms_p95']}; "
                    f"{e['evalsha_usec_per_call']} — {full['cycle_ms_mean']} / {full['cycle_ms_p50']} / "
                    f"{full['cycle_ms_p95']}; {full['evalsha_usec_per_call']}",
                    "same order (ratio shown)", f"ratio {a['cycle_time_ratio_full_vs_empty']}"])
        out.append(["(a) reaping beat(): lapsed instance with 2 jobs", "empty / full",
                    f"moved {e['reap']['moved']}, {e['reap']['monitor_commands']} / moved {full['reap']['moved']}, "
                    f"{full['reap']['monitor_commands']}", "2 commands (look, reap the lapsed one), 2 moved",
                    _met(e["reap"]["monitor_commands"] == full["reap"]["monitor_commands"] == {"EVALSHA": 2}
                         and e["reap"]["moved"] == full["reap"]["moved"] == 2)])
    elif a:
        out.append(["(a)", "ran", a["error"], "", "**no**"])
    b = f.get("b")
    if b and "error" not in b:
        fault = (f"Redis paused {b['kill']['redis_pause_s']:g} s" if b["kill"].get("redis_pause_s")
                 else f"gateway {b['kill']['gateway']} kill -9")
        out.append([f"(b) {b['jobs']} ingest jobs x {b['docs_per_job']} docs over {b['gateways']} gateways, "
                    f"{fault} at {b['kill']['after_s']} s",
                    "succeeded / failed / unfinished", f"{b['succeeded']} / {b['failed']} / {b['unfinished']} "
                    f"(all final {b['all_final_after_kill_s']} s after the kill)", f"{b['jobs']} / 0 / 0",
                    _met(b["succeeded"] == b["jobs"] and b["unfinished"] == 0)])
        out.append(["(b) documents", "submitted / acknowledged / found / lost",
                    f"{b['documents_submitted']} / {b['documents_acknowledged']} / {b['documents_found']} / "
                    f"{b['documents_lost']}", "0 lost", _met(b["documents_lost"] == 0
                                                            and b["documents_found"] == b["documents_submitted"])])
        out.append(["(b) duplicate completions (job ids with > 1 `succeeded` line, all gateways)", "count",
                    str(b["duplicate_completions"]), "0", _met(b["duplicate_completions"] == 0)])
        if b["kill"].get("redis_pause_s"):
            out.append(["(b) attempts interrupted by the job store, then requeued and resumed (fence > 1)",
                        "interruptions logged; jobs resumed", f"{b['store_interruptions']}; {b['resumed_jobs']}",
                        "every interrupted job finished", _met(b["unfinished"] == 0)])
        out.append(["(b) jobs resumed by another gateway (fence > 1)",
                    "resumed; of them held by the killed gateway; held at kill",
                    f"{b['resumed_jobs']}; {b['resumed_of_victim_jobs']}; {b['victim_held_jobs_at_kill']}",
                    "held ones resumed", _met(b["resumed_of_victim_jobs"] == b["victim_held_jobs_at_kill"])])
        out.append(["(b) stale attempts refused (LeaseLost) / requeue beats", "count",
                    f"{len(b['lease_lost_warnings'])} / {len(b['requeue_warnings'])}", "", ""])
    elif b:
        out.append(["(b)", "ran", b["error"], "", "**no**"])
    return out


def write(figures: dict[str, Any], out: Path, command: str) -> str:
    """``out``.json and ``out``.md; the markdown."""
    a, b = figures.get("a", {}), figures.get("b", {})
    lines = [
        f"- Wall time {figures['wall_s']} s. Other work was running on the machine at the same time, so times are "
        "noisy.",
        "- (a) `RedisJobs` instances in the bench process on a fresh redis-server (loopback, no persistence); one "
        "cycle = one `RedisJobs.beat()` of one of three live instances. Commands counted with MONITOR (top level; "
        "`client_type == \"lua\"` apart) and with the `INFO commandstats` delta (which counts the script's own "
        "calls too), first on an empty database, then with "
        f"{a.get('cache', {}).get('written', '?')} embedding-cache entries in the same database "
        f"(`{a.get('cache', {}).get('key_example', 'emb:<revision>:query:<sha256>')}`, "
        f"{a.get('cache', {}).get('value_bytes', '?')} bytes each). The script is loaded before counting.",
        f"- (b) Redis, embedding (1 thread), retrieval (embedded Qdrant) and {b.get('gateways', '?')} gateways "
        f"(`--redis-url`, `--job-lease-s {b.get('job_lease_s', '?')}`, `--job-workers "
        f"{b.get('job_workers_per_gateway', '?')}`; OCR and reasoning not started). {b.get('jobs', '?')} ingest "
        f"jobs of {b.get('docs_per_job', '?')} Korean documents (distinct ids, batches of {b.get('batch_size', '?')}) "
        "submitted at once, round-robin; one gateway killed with SIGKILL once batches were landing; every job "
        "polled on the survivors until final. Found = the collection's `documents`; duplicate completions from "
        "the `services.runtime.jobs.base` completion lines of every gateway's captured log; resumed = the job's "
        "fence (attempt) above 1.", "",
        md_table(["part / figure", "measure", "result", "target", "met"], rows(figures)), "",
        "Every figure (commands by name, per-job fences, warnings with timestamps) is in the JSON next to this file.",
        ""]
    return write_result(out.name, "Job store: orphan checks in a full database, a gateway killed under concurrent "
                        "ingest", lines, figures, out=out.parent, command=command)


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    p = argparse.ArgumentParser(prog="python -m bench.jobs_store", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cycles", type=int, default=50, help="(a) beats counted per setting")
    p.add_argument("--cached-vectors", type=int, default=100_000, help="(a) embedding-cache keys written")
    p.add_argument("--gateways", type=int, default=3, help="(b) gateway processes on one Redis")
    p.add_argument("--jobs", type=int, default=30, help="(b) concurrent ingest jobs")
    p.add_argument("--docs-per-job", type=int, default=40, help="(b) documents per job")
    p.add_argument("--batch-size", type=int, default=4, help="(b) ingest batch size")
    p.add_argument("--job-lease-s", type=float, default=1.5, help="(b) the gateways' --job-lease-s")
    p.add_argument("--job-workers", type=int, default=2, help="(b) the gateways' --job-workers")
    p.add_argument("--kill-after-docs", type=int, default=120,
                   help="(b) kill once this many documents are acknowledged across jobs (waits at most 60 s)")
    p.add_argument("--deadline-s", type=float, default=120.0, help="(b) longest wait for every job to be final")
    p.add_argument("--redis-pause-s", type=float, default=0.0,
                   help="(b) pause Redis this long (CLIENT PAUSE ALL) instead of killing a gateway; give a "
                        "--job-lease-s longer than it, so only the hand-back of interrupted jobs can resume them")
    p.add_argument("--only", choices=["a", "b"], help="run one part only")
    p.add_argument("--out", type=Path, default=Path("bench/results/jobs_store"),
                   help="results path without suffix (writes .md and .json)")
    args = p.parse_args(argv)
    if args.gateways < 2:
        p.error("--gateways must be at least 2 (one is killed)")
    figures: dict[str, Any] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jobs-store-") as tmp:
        if args.only in (None, "a"):
            try:
                figures["a"] = part_a(Path(tmp), args.cycles, args.cached_vectors)
            except Exception as exc:  # noqa: BLE001 - a broken part is a figure too
                figures["a"] = {"error": f"{type(exc).__name__}: {exc}"}
        if args.only in (None, "b"):
            try:
                figures["b"] = part_b(Path(tmp), gateways=args.gateways, jobs=args.jobs,
                                      docs_per_job=args.docs_per_job, batch_size=args.batch_size,
                                      lease_s=args.job_lease_s, workers=args.job_workers,
                                      kill_after_docs=args.kill_after_docs, deadline_s=args.deadline_s,
                                      redis_pause_s=args.redis_pause_s)
            except Exception as exc:  # noqa: BLE001
                figures["b"] = {"error": f"{type(exc).__name__}: {exc}"}
    figures["wall_s"] = round(time.perf_counter() - t0, 1)
    write(figures, args.out if args.out.is_absolute() else ROOT / args.out, command_line("bench.jobs_store", argv))
    print(md_table(["part / figure", "measure", "result", "target", "met"], rows(figures)))


if __name__ == "__main__":
    main()
