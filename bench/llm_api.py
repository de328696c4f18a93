"""The OpenAI-compatible LLM API, measured with the official `openai` client: schema conformance, tool calls, overhead.

    python -m bench.llm_api [--parts conformance,tools,overhead] [--rounds 15] [--out bench/results]

Everything runs as processes: the embedded LLM server (llama.cpp, the pinned GGUF), the reasoning
service and a gateway; the client is ``openai.AsyncOpenAI`` pointed at the gateway (and, for the
overhead, at the LLM server directly). One run, in this order:

1. **conformance**: ``json_schema`` answers over six schemas of different shapes (nested objects,
   arrays with exact lengths, enums, bounded numbers, patterns), nine Korean prompts each, temperature 0:
   how many answered, how many of the answers validate (jsonschema, here, again) and how many failed
   as schema violations (502 after one regeneration, never returned as success).
2. **tools**: the cases of ``bench/data/llm_tool_cases.json`` (44 Korean requests, six tools, eight
   needing none), ``tool_choice: auto``: the right tool, arguments valid against the tool's schema,
   no call when none is needed; per case kind. Nothing was tuned on these cases.
2b. **arguments**: the splits of ``bench/data/llm_tool_args.json`` (tool cases carrying the argument
   values they must have — Korean amounts, currencies, dates and times against today, plain values —
   and cases needing no call), ``tool_choice: auto``: right tool, no call when none is needed, and
   **arguments right** (each listed value checked, not the schema), per kind and split; the file
   says which split tuned what.
3. **overhead**: the same short prompt (8 tokens, temperature 0) on the LLM server directly and through
   the gateway, interleaved: TTFT (streamed) and total (not streamed) p50 and their difference.
5. **standin**: the overhead of 3 again, against a scripted stand-in server that answers at once
   (bench/standin.py, not a model) with 60 rounds: the LLM's own TTFT varies by more than the mesh
   adds, so only this isolates the gateway and reasoning hops (the target's figure).
4. **concurrency**: c = 1, 2, 4, 8, 16 streams (max(c, 4) requests of 32 tokens each level, every prompt
   new) through the gateway and on the LLM server directly, level by level, path after path: aggregate
   completion tokens/s, TTFT p50/p95, errors. The embedded server runs one slot.

A run of every part writes ``llm_api.md`` / ``.json``; a run of fewer parts ``llm_api_<parts>.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jsonschema
import openai

from bench.common import free_port, md_table, start_patient_reasoning, start_service, stop_service
from bench.report import command_line, write_result
from infra.llm.server import start_llm_server

CASES = Path(__file__).parent / "data" / "llm_tool_cases.json"
ARG_CASES = Path(__file__).parent / "data" / "llm_tool_args.json"
PARTS = ("conformance", "tools", "arguments", "overhead", "concurrency", "standin")
LEVELS = (1, 2, 4, 8, 16)
SCHEMAS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "nested_object": ({
        "type": "object", "additionalProperties": False, "required": ["name", "contact", "address"],
        "properties": {"name": {"type": "string"},
                       "contact": {"type": "object", "additionalProperties": False, "required": ["email", "phone"],
                                   "properties": {"email": {"type": "string"}, "phone": {"type": "string"}}},
                       "address": {"type": "object", "additionalProperties": False, "required": ["city", "district"],
                                   "properties": {"city": {"type": "string"}, "district": {"type": "string"}}}}},
        ["홍길동, hong@example.com, 010-1234-5678, 서울시 마포구에 삽니다. 연락처 카드로 정리해 줘.",
         "김영희 님(부산 해운대구, 전화 051-777-8888, 메일 yh@mail.kr) 정보를 구조화해 줘.",
         "이 사람의 정보를 정리해: 박민수, 대전 유성구, minsu@kaist.ac.kr, 042-350-0000",
         "고객 정보: 최지우 / 인천 연수구 / 032-111-2222 / jiwoo@naver.com",
         "정해인, 광주 북구 거주, 이메일 hi@jh.com, 휴대폰 010-9999-0000 정보를 카드로.",
         "연락처 정리: 윤서연, 수원시 영통구, 031-200-3000, sy@samsung.com",
         "오민호 (제주 서귀포시, 064-123-4567, minho@jeju.kr) 의 연락처 카드를 만들어 줘.",
         "강다은, 대구 수성구, dani@daegu.kr, 053-765-4321 를 정리해 줘.",
         "한지민 고객: 울산 남구 / 052-222-3333 / jimin@ulsan.kr"]),
    "array_exact": ({
        "type": "object", "additionalProperties": False, "required": ["books"],
        "properties": {"books": {"type": "array", "minItems": 3, "maxItems": 3, "items": {
            "type": "object", "additionalProperties": False, "required": ["title", "author"],
            "properties": {"title": {"type": "string"}, "author": {"type": "string"}}}}}},
        ["한국 현대 소설 세 권을 제목과 작가로 알려 줘.", "프로그래밍 입문서 세 권 추천해 줘.",
         "어린이 그림책 세 권을 알려 줘.", "역사 교양서 세 권 추천.", "여름 휴가에 읽을 책 세 권.",
         "자기계발서 세 권을 제목과 저자로.", "시집 세 권 추천해 줘.", "경제 입문서 세 권.",
         "추리 소설 세 권 알려 줘."]),
    "enums": ({
        "type": "object", "additionalProperties": False, "required": ["sentiment", "topic"],
        "properties": {"sentiment": {"type": "string", "enum": ["긍정", "부정", "중립"]},
                       "topic": {"type": "string", "enum": ["배송", "품질", "가격", "서비스"]}}},
        ["리뷰를 분류해 줘: 배송이 정말 빨라서 좋았어요.", "리뷰 분류: 가격에 비해 품질이 너무 별로예요.",
         "리뷰 분류: 상담원이 친절하게 안내해 주셨습니다.", "리뷰 분류: 보통이에요, 가격은 적당해요.",
         "리뷰 분류: 포장이 찢어져서 왔어요.", "리뷰 분류: 옷감이 부드럽고 튼튼합니다.",
         "리뷰 분류: 환불 요청했는데 답이 없네요.", "리뷰 분류: 할인해서 싸게 샀어요!",
         "리뷰 분류: 예정일보다 사흘 늦게 도착했습니다."]),
    "bounded_numbers": ({
        "type": "object", "additionalProperties": False, "required": ["stars", "price_krw", "discount_rate"],
        "properties": {"stars": {"type": "integer", "minimum": 1, "maximum": 5},
                       "price_krw": {"type": "integer", "minimum": 0, "maximum": 10_000_000},
                       "discount_rate": {"type": "number", "minimum": 0, "maximum": 1}}},
        ["별점 4개, 정가 35,000원에서 20% 할인된 상품 정보를 정리해.", "5점 만점에 3점, 12만 원, 할인 없음.",
         "별 다섯 개, 가격 9,900원, 10% 할인 중.", "평점 2점짜리 45만 원 노트북 가방, 30% 세일.",
         "별점 1점, 2만 원, 50% 할인 상품.", "4.0점 리뷰, 가격 1,200,000원, 할인율 15%.",
         "별점 5점, 7천 원, 5% 할인", "3점, 89,000원, 25% 할인된 운동화", "별점 4, 150만 원, 할인 없음"]),
    "evaluation": ({
        "type": "object", "additionalProperties": False, "required": ["criteria", "overall", "pass"],
        "properties": {"criteria": {"type": "array", "minItems": 2, "maxItems": 4, "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "score"],
            "properties": {"name": {"type": "string", "enum": ["정확성", "논리", "표현", "실무 깊이"]},
                           "score": {"type": "integer", "minimum": 0, "maximum": 10}}}},
            "overall": {"type": "integer", "minimum": 0, "maximum": 100}, "pass": {"type": "boolean"}}},
        ["면접 답변 평가: 'REST와 gRPC의 차이는 전송 형식과 스트리밍 지원입니다.'",
         "면접 답변 평가: '인덱스는 검색을 빠르게 하지만 쓰기를 느리게 합니다.'",
         "면접 답변 평가: '잘 모르겠습니다.'",
         "면접 답변 평가: '트랜잭션 격리 수준은 네 가지가 있고 각각 이상 현상이 다릅니다.'",
         "면접 답변 평가: '캐시는 그냥 빠른 메모리입니다.'",
         "면접 답변 평가: '장애가 나면 로그를 보고 원인을 찾고 재발 방지책을 문서로 남깁니다.'",
         "면접 답변 평가: '쿠버네티스는 컨테이너를 관리하는 도구로 파드 단위로 배포합니다.'",
         "면접 답변 평가: '협업할 때 코드 리뷰에서 근거를 들어 의견을 냅니다.'",
         "면접 답변 평가: 'JVM 가비지 컬렉션은 세대별로 나뉘어 동작합니다.'"]),
    "pattern_calendar": ({
        "type": "object", "additionalProperties": False, "required": ["company", "stage", "date"],
        "properties": {"company": {"type": "string", "minLength": 1},
                       "stage": {"type": "string", "enum": ["서류", "코딩테스트", "1차 면접", "2차 면접", "최종 발표"]},
                       "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}}},
        ["[네이버] 2026-12-14 1차 면접 안내드립니다.", "카카오 코딩테스트 일정: 2026년 12월 20일",
         "토스 최종 발표는 2027-01-08 입니다.", "쿠팡 서류 마감 2026-12-11", "라인 2차 면접 12/18(2026)",
         "당근 1차 면접이 2026-12-22 오후 3시에 있습니다.", "배민 코딩테스트 2027-01-02 오전 10시",
         "삼성전자 최종 발표 2026년 12월 30일 예정", "현대자동차 서류 접수 마감일 2026-12-09"]),
}


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def conformance(client: Any) -> dict[str, Any]:
    """Every schema's prompts; each answer validated again here."""
    rows: dict[str, dict[str, Any]] = {}
    for name, (schema, prompts) in SCHEMAS.items():
        r: dict[str, Any] = {"requests": 0, "answered": 0, "valid": 0, "schema_violation": 0, "other_errors": [],
                             "seconds": []}
        for prompt in prompts:
            r["requests"] += 1
            t = time.perf_counter()
            try:
                out = await client.chat.completions.create(
                    model="local", temperature=0, max_tokens=300, messages=[{"role": "user", "content": prompt}],
                    response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                                            "strict": True}})
            except openai.APIStatusError as err:
                code = (err.body or {}).get("code") if isinstance(err.body, dict) else None
                if code == "schema_violation":
                    r["schema_violation"] += 1
                else:
                    r["other_errors"].append(f"{err.status_code} {code}")
                continue
            r["seconds"].append(time.perf_counter() - t)
            r["answered"] += 1
            try:
                jsonschema.validate(json.loads(out.choices[0].message.content), schema)
                r["valid"] += 1
            except (ValueError, jsonschema.ValidationError):
                pass
        r["p50_s"] = round(_p(r.pop("seconds"), 0.5), 2)
        rows[name] = r
    answered = sum(r["answered"] for r in rows.values())
    return {"schemas": rows, "requests": sum(r["requests"] for r in rows.values()), "answered": answered,
            "valid": sum(r["valid"] for r in rows.values()),
            "schema_violations": sum(r["schema_violation"] for r in rows.values())}


async def tools(client: Any, cases: Path = CASES) -> dict[str, Any]:
    """The tool cases with ``tool_choice: auto``."""
    data = json.loads(await asyncio.to_thread(cases.read_text, encoding="utf-8"))
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in data["tools"]}
    kinds: dict[str, dict[str, int]] = {}
    details = []
    for case in data["cases"]:
        want = case["tool"]
        k = kinds.setdefault(want or "none", {"cases": 0, "right": 0, "args_valid": 0, "calls": 0, "errors": 0})
        k["cases"] += 1
        try:
            out = await client.chat.completions.create(model="local", temperature=0, max_tokens=160,
                                                       tools=data["tools"], tool_choice="auto",
                                                       messages=[{"role": "user", "content": case["text"]}])
        except openai.APIStatusError as err:
            k["errors"] += 1
            details.append({"text": case["text"], "want": want, "error": f"{err.status_code}"})
            continue
        calls = out.choices[0].message.tool_calls or []
        got = calls[0].function.name if calls else None
        if calls:
            k["calls"] += 1
            try:
                jsonschema.validate(json.loads(calls[0].function.arguments), schemas[got])
                k["args_valid"] += 1
            except (ValueError, jsonschema.ValidationError, KeyError):
                pass
        k["right"] += got == want
        details.append({"text": case["text"], "want": want, "got": got,
                        "arguments": calls[0].function.arguments if calls else None})
    tool_kinds = [v for n, v in kinds.items() if n != "none"]
    cases_with_tool = sum(v["cases"] for v in tool_kinds)
    none = kinds.get("none", {"cases": 0, "right": 0})
    all_calls = sum(v["calls"] for v in kinds.values())
    return {"kinds": kinds, "cases": len(data["cases"]), "cases_file": cases.name,
            "right_tool_share": round(sum(v["right"] for v in tool_kinds) / cases_with_tool, 3),
            "args_valid_share": (round(sum(v["args_valid"] for v in kinds.values()) / all_calls, 3)
                                 if all_calls else None),
            "no_call_when_none_needed_share": round(none["right"] / none["cases"], 3) if none["cases"] else None,
            "errors": sum(v["errors"] for v in kinds.values()), "details": details}


def expected_date(spec: str, today: dt.date) -> str:
    """An expected date of llm_tool_args.json (``today+N``, ``next:MM-DD``, ``nextweek:D``) on ``today``."""
    if spec.startswith("today+"):
        return (today + dt.timedelta(days=int(spec[6:]))).isoformat()
    if spec.startswith("next:"):
        month, day = (int(x) for x in spec[5:].split("-"))
        d = dt.date(today.year, month, day)
        return (d if d >= today else dt.date(today.year + 1, month, day)).isoformat()
    if spec.startswith("nextweek:"):
        monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(days=7)
        return (monday + dt.timedelta(days=int(spec[9:]))).isoformat()
    return spec


def argument_right(name: str, want: Any, got: Any, today: dt.date) -> bool:
    """One expected argument against the call's: dates resolved on ``today``, a city contained, else equal."""
    if name == "date":
        return isinstance(got, str) and got[:10] == expected_date(str(want), today)
    if name == "city":
        return isinstance(got, str) and str(want) in got
    if isinstance(want, int | float) and isinstance(got, int | float):
        return float(want) == float(got)
    return bool(want == got)


async def arguments(client: Any, split: str, cases: Path = ARG_CASES) -> dict[str, Any]:
    """One split of llm_tool_args.json, ``tool_choice: auto``: right tool, no call when none, arguments right."""
    data = json.loads(await asyncio.to_thread(cases.read_text, encoding="utf-8"))
    today = dt.datetime.now(ZoneInfo("Asia/Seoul")).date()  # the reasoning service's default zone
    kinds: dict[str, dict[str, int]] = {}
    details = []
    for case in data[split]:
        k = kinds.setdefault(case["kind"], {"cases": 0, "right_tool": 0, "args_checked": 0, "args_right": 0,
                                            "errors": 0})
        k["cases"] += 1
        try:
            out = await client.chat.completions.create(model="local", temperature=0, max_tokens=160,
                                                       tools=data["tools"], tool_choice="auto",
                                                       messages=[{"role": "user", "content": case["text"]}])
        except openai.APIStatusError as err:
            k["errors"] += 1
            details.append({"text": case["text"], "error": f"{err.status_code}"})
            continue
        calls = out.choices[0].message.tool_calls or []
        got = calls[0].function.name if calls else None
        k["right_tool"] += got == case["tool"]
        args = json.loads(calls[0].function.arguments) if calls else {}
        wrong = []
        if case.get("args") and got == case["tool"]:
            k["args_checked"] += 1
            wrong = [n for n, v in case["args"].items() if not argument_right(n, v, args.get(n), today)]
            k["args_right"] += not wrong
        elif case.get("args"):
            k["args_checked"] += 1  # the wrong tool (or none): its arguments are not right either
            wrong = ["(tool)"]
        details.append({"text": case["text"], "kind": case["kind"], "want": case["tool"], "got": got,
                        "arguments": args, "wrong": wrong})
    share = (lambda a, b: round(a / b, 3) if b else None)  # noqa: E731
    tool_kinds = [v for n, v in kinds.items() if n != "none"]
    none = kinds.get("none", {"cases": 0, "right_tool": 0})
    return {"split": split, "today": today.isoformat(), "kinds": kinds, "cases": len(data[split]),
            "right_tool_share": share(sum(v["right_tool"] for v in tool_kinds), sum(v["cases"] for v in tool_kinds)),
            "no_call_share": share(none["right_tool"], none["cases"]),
            "args_right_share": share(sum(v["args_right"] for v in kinds.values()),
                                      sum(v["args_checked"] for v in kinds.values())),
            "errors": sum(v["errors"] for v in kinds.values()), "details": details}


async def overhead(direct: Any, gateway: Any, model: str, rounds: int) -> dict[str, Any]:
    """The same short calls directly and through the gateway, interleaved."""
    ttft: dict[str, list[float]] = {"direct": [], "gateway": []}
    total: dict[str, list[float]] = {"direct": [], "gateway": []}
    for i in range(rounds + 1):
        paths: list[tuple[str, Any, str]] = [("direct", direct, model), ("gateway", gateway, "local")]
        for path, client, name in paths:
            # Every call its own tag after the same system prefix: each reuses exactly that cached prefix,
            # whichever call ran before it (the same messages twice would be a full cache hit the second time).
            def messages(kind: str, path: str = path, i: int = i) -> list[dict[str, str]]:
                return [{"role": "system", "content": "한 단어로 답한다."},
                        {"role": "user", "content": f"[{i}-{path}-{kind}] 하늘의 색은?"}]

            t = time.perf_counter()
            stream = await client.chat.completions.create(model=name, messages=messages("stream"), max_tokens=8,
                                                          temperature=0, stream=True)
            first = None
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - t
            t = time.perf_counter()
            await client.chat.completions.create(model=name, messages=messages("whole"), max_tokens=8, temperature=0)
            if i:  # the first round warms both paths' caches
                ttft[path].append(first or float("nan"))
                total[path].append(time.perf_counter() - t)
    med = {k: {"ttft_p50_ms": round(statistics.median(ttft[k]) * 1e3, 1),
               "total_p50_ms": round(statistics.median(total[k]) * 1e3, 1)} for k in ttft}
    return {"rounds": rounds, **med,
            "ttft_overhead_ms": round(med["gateway"]["ttft_p50_ms"] - med["direct"]["ttft_p50_ms"], 1),
            "total_overhead_ms": round(med["gateway"]["total_p50_ms"] - med["direct"]["total_p50_ms"], 1)}


async def _level(one: Any, client: Any, name: str, tag: str, n: int, c: int) -> list[Any]:
    """``n`` calls of ``one``, ``c`` at a time."""
    queue = iter(range(n))
    results: list[Any] = []

    async def worker() -> None:
        for i in queue:
            results.append(await one(client, name, f"{tag}-{i}"))

    await asyncio.gather(*(worker() for _ in range(c)))
    return results


async def concurrency(direct: Any, gateway: Any, model: str) -> dict[str, Any]:
    """Aggregate throughput and TTFT per concurrency level, through the gateway and directly."""
    async def one(client: Any, name: str, tag: str) -> tuple[float | None, int, str | None]:
        t = time.perf_counter()
        first = None
        try:
            stream = await client.chat.completions.create(
                model=name, max_tokens=32, temperature=0, stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": f"[{tag}] 가을에 읽기 좋은 책을 한 문장으로 추천해 줘."}])
            tokens = 0
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - t
                if chunk.usage:
                    tokens = chunk.usage.completion_tokens
            return first, tokens, None
        except openai.APIError as err:
            return first, 0, type(err).__name__

    out: dict[str, Any] = {}
    for path, client, name in (("gateway", gateway, "local"), ("direct", direct, model)):
        rows = []
        for c in LEVELS:
            n = max(c, 4)
            t = time.perf_counter()
            results = await _level(one, client, name, f"{path}-{c}", n, c)
            wall = time.perf_counter() - t
            ttft = [r[0] for r in results if r[0] is not None]
            rows.append({"c": c, "requests": n, "tokens_per_s": round(sum(r[1] for r in results) / wall, 2),
                         "ttft_p50_s": round(_p(ttft, 0.5), 2), "ttft_p95_s": round(_p(ttft, 0.95), 2),
                         "errors": sum(r[2] is not None for r in results), "wall_s": round(wall, 1)})
        out[path] = rows
    out["ratio_at_16"] = round(out["gateway"][-1]["tokens_per_s"] / out["direct"][-1]["tokens_per_s"], 3)
    return out


def markdown(figures: dict[str, Any]) -> list[str]:
    """The result's body."""
    out: list[str] = []
    if c := figures.get("conformance"):
        out += ["## Schema conformance (`response_format: json_schema`, temperature 0)", "",
                f"{c['requests']} requests over {len(c['schemas'])} schemas: {c['answered']} answered, "
                f"**{c['valid']} of {c['answered']} answers validate** (target 100 %), {c['schema_violations']} "
                "refused as schema violations (502, after one regeneration).", "",
                md_table(["schema", "requests", "answered", "valid", "schema violations", "other errors", "p50 s"],
                         [[n, str(r["requests"]), str(r["answered"]), str(r["valid"]), str(r["schema_violation"]),
                           ", ".join(r["other_errors"]) or "0", str(r["p50_s"])] for n, r in c["schemas"].items()]),
                ""]
    if t := figures.get("tools"):
        out += [f"## Tool calling (`tool_choice: auto`, bench/data/{t.get('cases_file', CASES.name)})", "",
                f"{t['cases']} cases: right tool {t['right_tool_share']:.1%} (target ≥ 90 %), arguments valid "
                f"{t['args_valid_share']:.1%} of the calls made (target 100 %), no call when none is needed "
                f"{t['no_call_when_none_needed_share']:.1%} (target ≥ 90 %); {t['errors']} errors.", "",
                md_table(["kind", "cases", "right", "calls made", "arguments valid", "errors"],
                         [[n, str(v["cases"]), str(v["right"]), str(v["calls"]), str(v["args_valid"]),
                           str(v["errors"])] for n, v in t["kinds"].items()]), ""]
    for split, a in (figures.get("arguments") or {}).items():
        out += [f"## Tool decisions and arguments (`tool_choice: auto`, bench/data/{ARG_CASES.name}, {split} split)",
                "",
                f"{a['cases']} cases, today {a['today']}: right tool {a['right_tool_share']:.1%} (target ≥ 95 %), "
                f"no call when none is needed {a['no_call_share']:.1%} (target ≥ 90 %), **arguments right** "
                f"(values checked, not the schema) {a['args_right_share']:.1%} (target ≥ 90 %); {a['errors']} errors.",
                "", md_table(["kind", "cases", "right tool (none: no call)", "arguments checked", "arguments right",
                              "errors"],
                             [[n, str(v["cases"]), str(v["right_tool"]), str(v["args_checked"]), str(v["args_right"]),
                               str(v["errors"])] for n, v in a["kinds"].items()]), "",
                "Misses: " + ("; ".join(f"{d['text']} → {d.get('got')} "
                                        f"{json.dumps(d.get('arguments'), ensure_ascii=False)}"
                                        f" ({', '.join(d.get('wrong') or []) or 'tool'})"
                                        for d in a["details"] if d.get("wrong") or d.get("error")
                                        or d.get("got") != d.get("want")) or "none") + ".", ""]
    if o := figures.get("overhead"):
        out += ["## Gateway overhead over llama-server called directly (same prompt, interleaved)", "",
                md_table(["path", "TTFT p50 ms", "total p50 ms (not streamed)"],
                         [[k, str(o[k]["ttft_p50_ms"]), str(o[k]["total_p50_ms"])] for k in ("direct", "gateway")]),
                "", f"Overhead: TTFT {o['ttft_overhead_ms']} ms, total {o['total_overhead_ms']} ms (targets ≤ 5 ms "
                f"each), {o['rounds']} rounds.", ""]
    if o := figures.get("standin_overhead"):
        out += ["## Gateway overhead against an instant stand-in backend (the mesh's own cost per call)", "",
                md_table(["path", "TTFT p50 ms", "total p50 ms (not streamed)"],
                         [[k, str(o[k]["ttft_p50_ms"]), str(o[k]["total_p50_ms"])] for k in ("direct", "gateway")]),
                "", f"Overhead: TTFT {o['ttft_overhead_ms']} ms, total {o['total_overhead_ms']} ms (targets ≤ 5 ms "
                f"each), {o['rounds']} rounds; gateway = gateway + reasoning service, two hops.", ""]
    if c := figures.get("concurrency"):
        out += ["## Concurrent streams (one llama-server slot, 32 tokens each)", "",
                md_table(["c", "gateway tokens/s", "direct tokens/s", "gateway TTFT p50 / p95 s",
                          "direct TTFT p50 / p95 s", "errors gateway / direct"],
                         [[str(g["c"]), str(g["tokens_per_s"]), str(d["tokens_per_s"]),
                           f"{g['ttft_p50_s']} / {g['ttft_p95_s']}", f"{d['ttft_p50_s']} / {d['ttft_p95_s']}",
                           f"{g['errors']} / {d['errors']}"] for g, d in zip(c["gateway"], c["direct"], strict=True)]),
                "", f"Aggregate tokens/s through the gateway at c = 16: {c['ratio_at_16']:.1%} of direct "
                "(target ≥ 95 %).", ""]
    return out


async def standin_overhead(rounds: int) -> dict[str, Any]:
    """The overhead part against an instant stand-in backend: the mesh's own cost per call."""
    from bench.standin import ChatStandIn

    standin = ChatStandIn([{"chunks": ["파랑", "색"]}])
    procs = []
    try:
        rs, rs_port = start_service("services.reasoning", "--backend-url", standin.url, "--backend-model", "standin")
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}")
        procs.append(gw)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw_port}/v1", api_key="unused", max_retries=0,
                                      timeout=60) as gateway, \
                openai.AsyncOpenAI(base_url=standin.url, api_key="unused", max_retries=0, timeout=60) as direct:
            return await overhead(direct, gateway, "standin", rounds)
    finally:
        for p in procs:
            stop_service(p)
        standin.close()


async def run(parts: tuple[str, ...], rounds: int, cases: Path = CASES,
              splits: tuple[str, ...] = ("tune", "eval")) -> dict[str, Any]:
    """Start the LLM server, the reasoning service and a gateway; run the parts."""
    out: dict[str, Any] = {}
    if "standin" in parts:
        out["standin_overhead"] = await standin_overhead(max(rounds, 60))
        if set(parts) == {"standin"}:
            return out
    log_dir = Path(tempfile.mkdtemp(prefix="mesh-bench-llm-api-"))
    llm = start_llm_server(free_port(), log_path=log_dir / "llm.log")
    procs = []
    out["model"] = llm.model
    try:
        rs, rs_port = start_patient_reasoning(llm.base_url)
        procs.append(rs)
        gw, gw_port = start_service("gateway", "--reasoning-targets", f"127.0.0.1:{rs_port}",
                                    "--reasoning-first-token-s", "600", "--reasoning-generation-s", "600",
                                    "--reasoning-total-s", "600", "--reasoning-timeout-ms", "600000")
        procs.append(gw)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw_port}/v1", api_key="unused", max_retries=0,
                                      timeout=600) as gateway, \
                openai.AsyncOpenAI(base_url=llm.base_url, api_key="unused", max_retries=0, timeout=600) as direct:
            if "conformance" in parts:
                out["conformance"] = await conformance(gateway)
            if "tools" in parts:
                out["tools"] = await tools(gateway, cases)
            if "arguments" in parts:
                out["arguments"] = {split: await arguments(gateway, split) for split in splits}
            if "overhead" in parts:
                out["overhead"] = await overhead(direct, gateway, llm.model, rounds)
            if "concurrency" in parts:
                out["concurrency"] = await concurrency(direct, gateway, llm.model)
    finally:
        for p in procs:
            stop_service(p)
        llm.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    """CLI."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_api", description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=15, help="overhead rounds per path [default 15]")
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="results folder")
    parser.add_argument("--cases", type=Path, default=CASES, help="tool cases (bench/data/llm_tool_cases_tune.json "
                                                                  "tunes; the default reports)")
    parser.add_argument("--splits", default="tune,eval", help="splits of llm_tool_args.json the arguments part runs")
    args = parser.parse_args(argv)
    parts = tuple(p for p in args.parts.split(",") if p)
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    figures = asyncio.run(run(parts, args.rounds, args.cases, tuple(args.splits.split(","))))
    body = ["- The embedded model (llama.cpp server, one slot, 2 threads), the reasoning service and a gateway as "
            "processes on loopback; the official `openai` client against the gateway (and, for the overhead, the "
            "LLM server directly). Tool choices and response formats are decoded as schema-constrained output "
            "(llama-server's grammar from the schema) and validated in the reasoning service.", "", *markdown(figures)]
    name = "llm_api" if set(parts) == set(PARTS) else "llm_api_" + "_".join(parts)
    write_result(name, "OpenAI-compatible LLM API", body, figures, out=args.out,
                 command=command_line("bench.llm_api", argv))
    print("\n".join(body))


if __name__ == "__main__":
    main()
