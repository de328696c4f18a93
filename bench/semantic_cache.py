"""The semantic answer cache's decision on paraphrases and near-misses: cosine alone, and cosine + code.

    python -m bench.semantic_cache --split tune|report [--threshold T] [--limit N]

Set: bench/data/semantic_cache_ko.json over answers_ko's passages. Embedding, retrieval and the
reasoning service over the embedded LLM run as processes, the gateway in process. Each base question
is answered through ``/v1/answers`` (a checked answer is stored); each paraphrase and near-miss (on
the report split also near-misses made by code) is then looked up through the gateway's own cache
path, no LLM: a paraphrase served is a *hit*, a near-miss served a *false hit*. Per question, its
cosine and the rule of :func:`gateway.answers.sameneed.same_need` that refuses it are kept, so every
threshold of the grid reads off one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import free_port, md_table, start_patient_reasoning, start_retrieval_pair
from bench.report import command_line, write_result
from gateway.answers import protocol as api
from gateway.answers.sameneed import same_need
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.http.deadline import Deadline
from gateway.vectors.cache import LocalLruCache
from gateway.wiring import build_mesh
from infra.llm.server import start_llm_server
from services.runtime.models import current_model_dir
from services.runtime.processes import stop_process

ROOT = Path(__file__).resolve().parent
THRESHOLD = GatewaySettings().answer_cache_threshold
GRID = [0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92, 0.94, 0.96]


def unit(values: Any) -> np.ndarray:
    """The vector scaled to length one."""
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


async def rows_of(items: list[dict], passages: list[dict], targets: dict[str, Any], threshold: float,
                  entities: list[str]) -> list[dict[str, Any]]:
    """One row per (base, other question): kind, cosine, code's verdict, and whether the cache served it."""
    config = GatewaySettings.model_validate({**targets, "answer_cache_threshold": threshold,
                                             "reasoning_total_s": 600})
    app = create_app(config, build_mesh(config, cache=LocalLruCache(1000)))
    rows: list[dict[str, Any]] = []
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                                                   base_url="http://gw", timeout=600) as http:
        await http.post("/v1/collections", json={"name": "semcache", "fields": {}})
        docs = [{"id": p["id"], "text": p["text"], "payload": {"title": p["title"]}} for p in passages]
        job = (await http.post("/v1/collections/semcache/documents", json={"documents": docs})).json()
        for _ in range(600):  # the ingest job, polled
            if (await http.get(f"/v1/jobs/{job['id']}")).json()["state"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.3)
        mesh = app.state.mesh
        for item in items:
            base = item["base"]
            out = (await http.post("/v1/answers", json={"collection": "semcache", "question": base})).json()
            print(f"base answered={out.get('answerable')} {base}", flush=True)
            text = "\n".join(p["text"] for p in out.get("passages", []))
            cited = "\n".join(c["text"] for c in out.get("citations", []))
            vb = unit((await mesh.search.query_vector("semcache", base, Deadline(30))).values)
            others = {**{k: item[k] for k in ("paraphrases", "near_misses")},
                      "generated": generated(base, entities) if entities else []}
            for kind, questions in others.items():
                for q in questions:
                    vq = unit((await mesh.search.query_vector("semcache", q, Deadline(30))).values)
                    body = api.AnswerRequest(collection="semcache", question=q)
                    rewrite = api.Rewrite(status="skipped", query=q, ms=0.0)
                    _, hit, ms = await mesh.answers._cached(body, rewrite, Deadline(30))
                    rows.append({"base": base, "question": q, "kind": kind, "cos": round(float(vb @ vq), 4),
                                 "base_answered": bool(out.get("answerable")),
                                 "refused": same_need(q, base, text, cited) if out.get("answerable") else "no_answer",
                                 "served": hit is not None, "served_question": hit.question if hit else None,
                                 "lookup_ms": round(ms, 2)})
    return rows


def generated(base: str, entities: list[str]) -> list[str]:
    """Near-misses made by code: each collection name of ``base`` swapped for every other, each number changed."""
    out = []
    for name in entities:
        if name in base:
            out += [base.replace(name, other) for other in entities if other != name and other not in base]
    for m in re.finditer(r"\d+", base):
        n = int(m.group())
        out += [base[:m.start()] + str(v) + base[m.end():] for v in (n + 1, n * 3)]
    return out


def rates(rows: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """Paraphrase hits and false hits at ``threshold`` (bases the LLM answered), cosine alone and with code."""
    para = [r for r in rows if r["kind"] == "paraphrases" and r["base_answered"]]
    near = [r for r in rows if r["kind"] in ("near_misses", "generated") and r["base_answered"]]

    def share(rs: list[dict], code: bool) -> float:
        return round(100 * sum(r["cos"] >= threshold and (not code or r["refused"] is None) for r in rs)
                     / max(1, len(rs)), 1)
    return {"threshold": threshold, "paraphrase_hits_cos": share(para, False), "false_hits_cos": share(near, False),
            "paraphrase_hits": share(para, True), "false_hits": share(near, True)}


def main() -> None:
    """Run one split and write bench/results/semantic_cache[_<split>].md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="tune")
    ap.add_argument("--threshold", type=float, default=None,
                    help="the cache's threshold (default: the gateway's); the grid is read off the same run")
    ap.add_argument("--limit", type=int, default=0, help="base questions at most (0: all)")
    args = ap.parse_args()
    data = json.loads((ROOT / "data" / "semantic_cache_ko.json").read_text(encoding="utf-8"))
    passages = json.loads((ROOT / "data" / "answers_ko.json").read_text(encoding="utf-8"))["passages"]
    procs: list = []
    llm = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            emb_port, ret_port = start_retrieval_pair(Path(tmp), current_model_dir(), procs)
            llm = start_llm_server(free_port(), log_path=Path(tmp) / "llm.log")
            rs, rs_port = start_patient_reasoning(llm.base_url)
            procs.append(rs)
            targets = {"embedding_target": f"127.0.0.1:{emb_port}", "retrieval_target": f"127.0.0.1:{ret_port}",
                       "reasoning_targets": f"127.0.0.1:{rs_port}"}
            items = data[args.split][:args.limit] if args.limit else data[args.split]
            entities = data.get("entities", []) if args.split == "report" else []
            rows = asyncio.run(rows_of(items, passages, targets, args.threshold or THRESHOLD, entities))
        finally:
            for p in procs:
                stop_process(p)
            if llm is not None:
                llm.stop()
    grid = [rates(rows, t) for t in GRID]
    # The lowest threshold whose near-misses give no false hit with code (most paraphrases served).
    best = next((g for g in grid if g["false_hits"] == 0), grid[-1])
    chosen = rates(rows, args.threshold) if args.threshold is not None else best
    served = {k: [r for r in rows if r["kind"] == k and r["base_answered"]]
              for k in ("paraphrases", "near_misses", "generated")}
    live = {k: round(100 * sum(r["served"] for r in v) / max(1, len(v)), 1) for k, v in served.items()}
    wrong_base = sum(r["served"] and r["served_question"] != r["base"] for r in rows)
    refusals = dict(Counter(f"{r['kind']}:{r['refused']}" for r in rows if r["refused"]))
    body = [f"Split `{args.split}` of bench/data/semantic_cache_ko.json: {len(data[args.split])} base questions, "
            f"{sum(r['kind'] == 'paraphrases' for r in rows)} paraphrases, "
            f"{sum(r['kind'] == 'near_misses' for r in rows)} near-misses written and "
            f"{sum(r['kind'] == 'generated' for r in rows)} made by code. A hit needs the cosine ≥ the threshold "
            "and, with code, same_need's acceptance given the base's passages.", "",
            md_table(["threshold", "paraphrase hits (cos only)", "near-miss hits (cos only)",
                      "paraphrase hits (cos + code)", "near-miss hits (cos + code)"],
                     [[f"{g['threshold']:.2f}", f"{g['paraphrase_hits_cos']} %", f"{g['false_hits_cos']} %",
                       f"{g['paraphrase_hits']} %", f"{g['false_hits']} %"] for g in grid]), "",
            f"At {chosen['threshold']:.2f}: paraphrases served {chosen['paraphrase_hits']} %, near-misses served "
            f"{chosen['false_hits']} %.", "",
            f"Through the gateway's cache path at {args.threshold or THRESHOLD:.2f} (every base's answer stored, so "
            f"a question may meet another base's): paraphrases served {live['paraphrases']} % "
            f"({sum(r['served'] for r in served['paraphrases'])}/{len(served['paraphrases'])}), written "
            f"near-misses served {live['near_misses']} % ({sum(r['served'] for r in served['near_misses'])}/"
            f"{len(served['near_misses'])}), near-misses made by code served {live['generated']} % "
            f"({sum(r['served'] for r in served['generated'])}/{len(served['generated'])}); "
            f"served another base's answer: {wrong_base}; bases the LLM answered: "
            f"{sum(1 for i in items if any(r['base'] == i['base'] and r['base_answered'] for r in rows))} of "
            f"{len(items)}; lookup p50 "
            f"{statistics.median(r['lookup_ms'] for r in rows):.1f} ms.", "", "Code's refusals by kind and rule: "
            + ", ".join(f"{k} {v}" for k, v in sorted(refusals.items())), "",
            md_table(["kind", "cos", "code", "served", "question", "base"],
                     [[r["kind"], f"{r['cos']:.3f}", r["refused"] or "same", "yes" if r["served"] else "",
                       r["question"], r["base"]] for r in rows])]
    name = "semantic_cache" if args.split == "report" else f"semantic_cache_{args.split}"
    print(write_result(name, f"Semantic answer cache: paraphrases and near-misses ({args.split})", body,
                       {"split": args.split, "grid": grid, "chosen": chosen, "served": live, "wrong_base": wrong_base,
                        "rows": rows, "refusals": refusals},
                       command=command_line("bench.semantic_cache")))


if __name__ == "__main__":
    main()
