"""Sampling and prompt choices of the embedded LLM, measured where they were made: first answers passing every check.

    python -m bench.llm_sampling [--compare dry|prompt|name] [--reps 3] [--dry 0.8] [--out bench/results]

The tuning set is bench/reasoning.py's five queries over its five items (never the report set
bench/data/reasoning_set.json, on which bench.llm_select reports the choices). Every card of a
first answer goes through the service's checks (services/reasoning/checks.py), in the service's JSON
schema (services/reasoning/prompts.py). No regeneration: this counts what the choice alone gets right.

- ``--compare dry``: each rep runs the embedded server once without DRY and once with it and sends
  each query once, in the service's prompt (written to llm_sampling.md);
- ``--compare prompt``: one server with the default sampling; each query in the previous prompt (long
  reasons of two sentences, 40-120 characters), in the service's (one sentence, 30-80 characters), and
  in the service's with a per-card instruction that does not repeat the query (fewer prompt tokens;
  rejected), interleaved (written to llm_prompts_length.md). The three prompts' worked examples differ,
  so each call re-reads them: seconds here include that, unlike in the service, where they stay cached.
- ``--compare name``: one server with the default sampling; each query in the service's prompt and in
  the same prompt whose copying rule also says not to write the product's name again (it is on the
  card already), interleaved (written to llm_prompts_name.md). Same worked example, so both keep the
  cached prefix of the system message's first rule only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import free_port, md_table
from bench.reasoning import ITEMS, STREAM_QUERIES
from bench.report import write_result
from infra.llm.server import DRY_MULTIPLIER, start_llm_server
from services.reasoning import prompts
from services.reasoning.checks import check_reason
from services.reasoning.prompts import reasons_messages, reasons_schema

# The prompt before the one-sentence rule, kept to measure the choice against.
PREVIOUS_RULE = ("3. short: 한 줄, 10~40자. long: 새로운 내용의 두 문장, 40~120자. "
                 "long에서 short를 되풀이하지 않습니다.\n")
PREVIOUS_ANSWER = (
    '{"reasons": [{"id": "e1", "short": "첫 캠핑에서 편히 쉴 자리를 챙겨 주는 선물", '
    '"long": "가벼워서 캠핑이 처음인 친구도 들고 다니기 부담이 없습니다. 불 앞이나 텐트 옆 어디서든 '
    '바로 펴고 앉을 수 있어 첫날부터 쓸모가 있습니다."}, '
    '{"id": "e2", "short": "어두운 캠핑장의 밤을 밝혀 줄 실용적인 선물", '
    '"long": "캠핑장은 해가 지면 금방 어두워져 초보에게 조명이 꼭 필요합니다. 휴대폰 충전기로 다시 '
    '채울 수 있어 배터리를 따로 챙기지 않아도 됩니다."}]}')
CURRENT_RULE = "3. short: 한 줄, 10~40자. long: short에 없는 새로운 내용의 한 문장, 30~80자.\n"
QUERY_ONCE_TASK = "- 할 일: 카드 {i}의 이름과 정보만 보고, 이 상품이 검색어에 왜 맞는지 씁니다."
COPY_RULE = ("2. 이름이나 정보를 그대로 베끼지 않습니다. "
             "검색어의 상황(누구에게, 언제, 무엇을 위해)과 연결해 자기 말로 씁니다.\n")
NO_NAME_RULE = ("2. short와 long에 상품 이름을 다시 쓰지 않습니다(이름은 카드에 이미 보입니다). "
                "정보를 그대로 베끼지 않고, 검색어의 상황(누구에게, 언제, 무엇을 위해)과 연결해 자기 말로 씁니다.\n")


def previous_messages(query: str, rows: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The service's messages with the previous length rule and worked example."""
    assert CURRENT_RULE in prompts.REASONS_SYSTEM, "the service's rule changed: update this bench"
    messages = reasons_messages(query, rows)
    messages[0] = {"role": "system", "content": prompts.REASONS_SYSTEM.replace(CURRENT_RULE, PREVIOUS_RULE)}
    messages[2] = {"role": "assistant", "content": PREVIOUS_ANSWER}
    return messages


def query_once_messages(query: str, rows: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The service's messages with a per-card instruction that does not repeat the query (tried, rejected)."""
    return reasons_messages(query, rows, task=QUERY_ONCE_TASK)


def no_name_messages(query: str, rows: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The service's messages whose copying rule also forbids writing the product's name again."""
    assert COPY_RULE in prompts.REASONS_SYSTEM, "the service's rule changed: update this bench"
    messages = reasons_messages(query, rows)
    messages[0] = {"role": "system", "content": prompts.REASONS_SYSTEM.replace(COPY_RULE, NO_NAME_RULE)}
    return messages


def first_answer(base_url: str, model: str, query: str, messages=reasons_messages) -> dict:
    """One reasons answer for ``query``: its seconds, tokens and each card's failed checks."""
    rows = [(i.id, i.title, i.description) for i in ITEMS]
    body = {"model": model, "messages": messages(query, rows), "max_tokens": 1024, "temperature": 0.3,
            "response_format": {"type": "json_object", "schema": reasons_schema([r[0] for r in rows])}}
    start = time.perf_counter()
    resp = httpx.post(f"{base_url}/chat/completions", json=body, timeout=600)
    resp.raise_for_status()
    seconds = time.perf_counter() - start
    data = resp.json()
    cards = json.loads(data["choices"][0]["message"]["content"])["reasons"]
    failed = []
    for card in cards:
        item = next(i for i in ITEMS if i.id == card["id"])
        others = [(o.title, o.description) for o in ITEMS if o.id != item.id]
        findings = check_reason(card["short"], card["long"], title=item.title, description=item.description,
                                query=query, others=others)
        failed.append(sorted({f.kind for f in findings}))
    return {"query": query, "seconds": seconds, "completion_tokens": data["usage"]["completion_tokens"],
            "prompt_tokens": data["usage"]["prompt_tokens"],
            "cards": len(cards), "passing": sum(not f for f in failed), "failed": failed}


def run(reps: int, dry: float) -> dict[str, list[dict]]:
    """Every rep: the server without DRY, then with it; each query once per server."""
    out: dict[str, list[dict]] = {"0.0": [], str(dry): []}
    for rep in range(reps):
        for multiplier in (0.0, dry):
            server = start_llm_server(free_port(), dry_multiplier=multiplier,
                                      log_path=Path(tempfile.mkdtemp()) / "llm.log")
            try:
                for query in STREAM_QUERIES:
                    r = first_answer(server.base_url, server.model, query)
                    out[str(multiplier)].append({"rep": rep, **r})
                    print(f"[sampling] rep {rep} dry {multiplier}: {query}: {r['passing']}/{r['cards']} "
                          f"passing, {r['seconds']:.1f} s", flush=True)
            finally:
                server.stop()
    return out


PROMPT_VARIANTS = {
    "prompt": {"previous: long of two sentences (40-120 chars), query on every card": previous_messages,
               "service: long of one sentence (30-80 chars), query on every card": reasons_messages,
               "long of one sentence, query once (at the top)": query_once_messages},
    "name": {"service": reasons_messages, "product name not written again": no_name_messages},
}


def run_prompts(reps: int, compare: str = "prompt") -> dict[str, list[dict]]:
    """One server with the default sampling; each query in every prompt of ``compare``, interleaved."""
    variants = PROMPT_VARIANTS[compare]
    out: dict[str, list[dict]] = {name: [] for name in variants}
    server = start_llm_server(free_port(), log_path=Path(tempfile.mkdtemp()) / "llm.log")
    try:
        for rep in range(reps):
            for query in STREAM_QUERIES:
                for name, messages in variants.items():
                    r = first_answer(server.base_url, server.model, query, messages)
                    out[name].append({"rep": rep, **r})
                    print(f"[prompt] rep {rep} {name}: {query}: {r['passing']}/{r['cards']} passing, "
                          f"{r['seconds']:.1f} s", flush=True)
    finally:
        server.stop()
    return out


def main() -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_sampling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", choices=["dry", *PROMPT_VARIANTS], default="dry",
                        help="what to compare [default dry]")
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of both settings [default 3]")
    parser.add_argument("--dry", type=float, default=DRY_MULTIPLIER,
                        help=f"the DRY multiplier to compare with none [default {DRY_MULTIPLIER}]")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    results = run(args.reps, args.dry) if args.compare == "dry" else run_prompts(args.reps, args.compare)
    rows = []
    for setting, answers in results.items():
        passing, cards = sum(a["passing"] for a in answers), sum(a["cards"] for a in answers)
        rows.append([f"DRY {setting}" if args.compare == "dry" else setting, str(len(answers)),
                     f"{passing}/{cards} ({passing / cards:.0%})",
                     f"{statistics.median(a['seconds'] for a in answers):.1f}",
                     f"{statistics.median(a['prompt_tokens'] for a in answers):.0f}",
                     f"{statistics.median(a['completion_tokens'] for a in answers):.0f}"])
    title, name = {
        "dry": ("DRY sampling", "llm_sampling"),
        "prompt": ("The long reason's length rule", "llm_prompts_length"),
        "name": ("Not writing the product's name again", "llm_prompts_name"),
    }[args.compare]
    lines = ["- Set: bench/reasoning.py's 5 queries x 5 items (the tuning set; the report set is "
             "bench/data/reasoning_set.json, bench.llm_select).", "",
             md_table(["sampling" if args.compare == "dry" else "prompt", "answers", "cards passing every check",
                       "seconds p50", "prompt tokens p50", "tokens p50"], rows), ""]
    print(write_result(name, f"{title} on the tuning queries (first answers, no regeneration)", lines,
                       {"reps": args.reps, "results": results}, out=args.out), flush=True)


if __name__ == "__main__":
    main()
