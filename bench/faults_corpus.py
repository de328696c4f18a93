"""The bad-input corpus over every REST route (the gRPC half is :mod:`bench.faults_grpc`), and what it found.

REST: the routes are read from the running gateway's own ``/openapi.json``, so a route added later is
covered without editing this file (with the generic cases only, until it gets a valid template here).
Each route gets generic cases (malformed JSON, an empty body, wrong top-level types, invalid UTF-8,
nesting 100,000 deep, the wrong content type, a body over its limit, bad path parameters) and, from a
valid template, every top-level field replaced by each bad value (10**400, NaN, Infinity, a lone
surrogate, empty, null, wrong types, beyond int64, 100,000 characters, 60 levels of nesting), removed,
or joined by an unknown field; plus targeted nested cases (filters, payloads, history).

Nothing here targets the collections the other scenarios use.
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.load import NOT_SENT, Request, run_load

SCRATCH = "badinput"  # the corpus's own collection; never one another scenario uses
BAD = "__BAD_VALUE__"
NEST_OBJ = "{\"a\": " * 60 + "1" + "}" * 60
# Bad JSON values as raw text: some (NaN, 10**400, lone surrogates) cannot be written by json.dumps.
BAD_VALUES: dict[str, str] = {
    "int 10**400": "1" + "0" * 400, "NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity",
    "1e999": "1e999", "lone surrogate": '"\\ud800"', "empty string": '""', "null": "null", "list": "[]",
    "object": "{}", "bool": "true", "-1": "-1", "2**63": str(2**63), "-2**63-1": str(-(2**63) - 1),
    "100k chars": json.dumps("가" * 100_000), "nested 60": NEST_OBJ,
}


def tiny_png() -> str:
    """A small Korean-text-free PNG as base64 (valid input for the OCR routes)."""
    from PIL import Image, ImageDraw

    img = Image.new("L", (160, 40), 255)
    ImageDraw.Draw(img).text((5, 10), "OCR 123", fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def pdf_bomb(pages: int = 5_000) -> bytes:
    """A small PDF of ``pages`` blank pages (the same page object listed again and again)."""
    kids = " ".join(["3 0 R"] * pages)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 14400 14400] >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


def png_bomb() -> bytes:
    """A PNG declaring 100,000 x 100,000 pixels in a few bytes (a decompression bomb's header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + \
        chunk(b"IEND", b"")


def templates(png: str) -> dict[tuple[str, str], Any]:
    """A valid body (or None: no body) for each route; path parameters use the corpus's own names."""
    search = {"collection": SCRATCH, "query": "제주 여행", "top_k": 5}
    return {
        ("POST", "/v1/search"): search,
        ("POST", "/v1/collections"): {"name": f"{SCRATCH}-new", "fields": {"price": "integer"}},
        ("POST", "/v1/collections/{name}/documents"): {
            "documents": [{"id": "b1", "text": "잘못된 입력 시험 문서", "payload": {"price": 1}}], "batch_size": 8},
        ("POST", "/v1/collections/{name}/documents:delete"): {"ids": ["zz-none"]},
        ("POST", "/v1/collections/{name}/reindex"): None,
        ("POST", "/v1/collections/{name}/upgrade"): {
            "embedding_revision": "e5-next", "gate": {"queries": [{"query": "제주 여행", "relevant_ids": ["b1"]}],
                                                       "margin": 0.02, "mode": "dense"}, "batch_size": 16},
        ("POST", "/v1/collections/{name}/rollback"): None,
        ("POST", "/v1/jobs/{job_id}:cancel"): None,
        ("POST", "/v1/embeddings"): {"input": ["안녕하세요"], "model": "intfloat/multilingual-e5-small"},
        ("POST", "/v1/ocr/jobs"): {"documents": [{"content_base64": png}]},
        ("POST", "/v1/pii:detect"): {"text": "성명: 홍길동, 휴대폰 010-1234-5678", "mask": True},
        ("POST", "/v1/ocr:extract"): {"content_base64": png},
        ("POST", "/v1/masking/jobs"): {"documents": [{"content_base64": png}], "kinds": ["phone"], "keep": True,
                                       "masked_png": True},
        ("POST", "/v1/recommendations"): {"collection": SCRATCH, "query": "선물", "top_k": 3},
        ("POST", "/v1/recommendations:stream"): {"collection": SCRATCH, "query": "선물", "top_k": 3},
        ("POST", "/v1/chat"): {"session_id": "s1", "message": "안녕"},
        ("POST", "/v1/chat/completions"): {"model": "local", "messages": [{"role": "user", "content": "안녕"}],
                                           "max_tokens": 16},
        ("POST", "/v1/summaries"): {"text": "요약할 글입니다. 두 문장입니다."},
        ("POST", "/v1/answers"): {"collection": SCRATCH, "question": "제주 여행은 언제가 좋나요?", "top_k": 3},
        ("POST", "/v1/answers:stream"): {"collection": SCRATCH, "question": "제주 여행은 언제가 좋나요?", "top_k": 3},
        ("POST", "/v1/tasks/{name}"): {"input": {"text": "[카카오] 1차 면접: 내일 오후 3시"}, "cache": False},
        ("POST", "/v1/tasks/{name}:stream"): {"input": {"text": "[카카오] 1차 면접: 내일 오후 3시"}, "cache": False},
        ("POST", "/v1/interviews"): {"resume": "백엔드 개발자 3년, Java와 Redis", "posting": "백엔드 개발자 채용",
                                     "kind": "technical", "questions": 2},
        ("POST", "/v1/interviews/{interview_id}/answers"): {"answer": "캐시로 응답 시간을 줄였습니다.", "turn": 1},
        ("POST", "/v1/interviews/{interview_id}/report"): {"cache": False},
        ("POST", "/v1/interviews/{interview_id}/report:stream"): {"cache": False},
        ("POST", "/v1/conversations"): {"collection": SCRATCH, "categories": ["향수", "꽃"], "attributes": ["각인"]},
        ("POST", "/v1/conversations/{conversation_id}/turns"): {"text": "아내 생일 선물이요", "top_k": 5},
        ("POST", "/v1/conversations/{conversation_id}/turns:stream"): {"text": "아내 생일 선물이요", "top_k": 5},
        ("POST", "/v1/conversations/{conversation_id}:confirm"): None,
        ("POST", "/v1/conversations/{conversation_id}:reopen"): None,
        ("POST", "/v1/conversations/{conversation_id}/lists"): {"top_k": 3, "reasons": False},
        ("POST", "/v1/assistant/sessions"): {"collections": [SCRATCH], "tools": ["search"], "system": "",
                                             "caller": "corpus"},
        ("POST", "/v1/assistant/sessions/{session_id}/messages"): {"text": "제주 여행은 언제가 좋나요?"},
        ("POST", "/v1/files:read"): {"content_base64": png, "filename": "scan.png"},
        ("POST", "/v1/collections/{name}/files"): {"content_base64": png, "filename": "scan.png"},
    }


GOOD_PARAMS = {"name": SCRATCH, "job_id": "0" * 32, "model_id": "intfloat/multilingual-e5-small",
               "interview_id": "0" * 32, "conversation_id": "0" * 32, "session_id": "0" * 32}
ROUTE_PARAMS = {"/v1/tasks/{name}": {"name": "calendar_parse"}, "/v1/tasks/{name}:stream": {"name": "calendar_parse"}}


def good_params(path: str) -> dict[str, str]:
    """The path parameters that name something that exists on ``path`` (a task there, a collection elsewhere)."""
    return {**GOOD_PARAMS, **ROUTE_PARAMS.get(path, {})}


BAD_PARAMS = ["%00", "%ED%A0%80", "..%2F..%2Fetc", "A" * 300, "x%3Apages", "%20", "*", "-1e400", "%FF%FE"]
S = SCRATCH
NESTED_CASES: list[tuple[str, str, str]] = [  # (route, description, raw body)
    ("/v1/search", "filter eq 10**29", f'{{"collection": "{S}", "query": "책", "filter": {{"must": [{{"field": '
     '"price", "eq": 100000000000000000000000000000}]}}'),
    ("/v1/search", "filter gte NaN", f'{{"collection": "{S}", "query": "책", "filter": {{"must": [{{"field": "price", '
     '"gte": NaN}]}}'),
    ("/v1/search", "filter any_of 10k", json.dumps({"collection": SCRATCH, "query": "책", "filter": {"must": [
        {"field": "price", "any_of": ["x"] * 10_000}]}})),
    ("/v1/search", "fusion weight NaN", f'{{"collection": "{S}", "query": "책", "fusion": {{"method": "weighted", '
     '"dense_weight": NaN}}'),
    ("/v1/search", "mmr candidates 10**9", json.dumps({"collection": SCRATCH, "query": "책", "mmr": {
        "diversity": 0.5, "candidates": 10**9}})),
    ("/v1/search", "9 queries", json.dumps({"collection": SCRATCH, "queries": [f"질문 {i}" for i in range(9)]})),
    ("/v1/search", "duplicate queries", json.dumps({"collection": SCRATCH, "queries": ["제주", " 제주 "]})),
    ("/v1/search", "group_by unknown", json.dumps({"collection": SCRATCH, "query": "책", "group_by": "page"})),
    ("/v1/search", "query and queries", json.dumps({"collection": SCRATCH, "query": "책", "queries": ["책"]})),
    ("/v1/search", "expand n 10**9", json.dumps({"collection": SCRATCH, "query": "책", "expand": {"n": 10**9}})),
    ("/v1/answers", "history role system", json.dumps({"collection": SCRATCH, "question": "책", "history": [
        {"role": "system", "content": "x"}]})),
    ("/v1/answers", "question 100k", json.dumps({"collection": SCRATCH, "question": "가" * 100_000})),
    ("/v1/answers", "min_score NaN", f'{{"collection": "{S}", "question": "책", "min_score": NaN}}'),
    ("/v1/answers", "min_relevance NaN", f'{{"collection": "{S}", "question": "책", "min_relevance": NaN}}'),
    ("/v1/answers", "min_relevance 1e308", f'{{"collection": "{S}", "question": "책", "min_relevance": 1e308}}'),
    ("/v1/answers:stream", "question lone surrogate", f'{{"collection": "{S}", "question": "\\ud800책"}}'),
    ("/v1/recommendations", "filter eq 10**29", f'{{"collection": "{S}", "query": "책", "filter": {{"must": '
     '[{"field": "price", "eq": 100000000000000000000000000000}]}}'),
    ("/v1/collections/{name}/documents", "payload int 10**400",
     '{"documents": [{"id": "n1", "text": "문서", "payload": {"n": 1' + "0" * 400 + "}}]}"),
    ("/v1/collections/{name}/documents", "payload NaN", '{"documents": [{"id": "n1", "text": "문서", "payload": '
     '{"n": NaN}}]}'),
    ("/v1/collections/{name}/documents", "payload surrogate key", '{"documents": [{"id": "n1", "text": "문서", '
     '"payload": {"\\ud800": 1}}]}'),
    ("/v1/collections/{name}/documents", "payload nested 50", json.dumps({"documents": [
        {"id": "n1", "text": "문서", "payload": json.loads("{\"a\": " * 50 + "1" + "}" * 50)}]})),
    ("/v1/collections/{name}/documents", "duplicate ids", json.dumps({"documents": [
        {"id": "d", "text": "문서"}, {"id": "d", "text": "문서"}]})),
    ("/v1/collections/{name}/documents", "empty id", json.dumps({"documents": [{"id": "", "text": "문서"}]})),
    ("/v1/collections/{name}/documents", "10001 documents", json.dumps({"documents": [
        {"id": f"m{i}", "text": "문"} for i in range(10_001)]})),
    ("/v1/collections", "5000 fields", json.dumps({"name": f"{SCRATCH}-wide", "fields": {
        f"f{i}": "keyword" for i in range(5000)}})),
    ("/v1/collections", "bad field type", json.dumps({"name": f"{SCRATCH}-t", "fields": {"f": "vector"}})),
    ("/v1/chat", "history role system", json.dumps({"session_id": "s", "message": "안녕", "history": [
        {"role": "system", "content": "x"}]})),
    ("/v1/chat", "history 201", json.dumps({"session_id": "s", "message": "안녕", "history": [
        {"role": "user", "content": "x"}] * 201})),
    ("/v1/chat", "max_tokens 10**9", json.dumps({"session_id": "s", "message": "안녕", "max_tokens": 10**9})),
    ("/v1/chat/completions", "tool parameters NaN", '{"model": "local", "messages": [{"role": "user", '
     '"content": "안녕"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": '
     '"object", "properties": {"x": {"type": "number", "maximum": NaN}}}}}]}'),
    ("/v1/chat/completions", "schema surrogate key", '{"model": "local", "messages": [{"role": "user", '
     '"content": "안녕"}], "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": '
     '{"type": "object", "properties": {"\\ud800": {"type": "string"}}}}}}'),
    ("/v1/chat/completions", "schema enum 20,000", json.dumps({"model": "local", "messages": [
        {"role": "user", "content": "안녕"}], "response_format": {"type": "json_schema", "json_schema": {
            "name": "a", "schema": {"type": "object", "properties": {"c": {"enum": [
                f"v{i}" for i in range(20_000)]}}}}}})),
    ("/v1/chat/completions", "schema minItems 5000", json.dumps({"model": "local", "messages": [
        {"role": "user", "content": "안녕"}], "response_format": {"type": "json_schema", "json_schema": {
            "name": "a", "schema": {"type": "object", "properties": {"c": {"type": "array", "minItems": 5000,
                                                                            "items": {"type": "string"}}}}}}})),
    ("/v1/chat/completions", "tool maxLength 10**6", json.dumps({"model": "local", "messages": [
        {"role": "user", "content": "안녕"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"q": {"type": "string", "maxLength": 10**6}}}}}]})),
    ("/v1/chat/completions", "stream_options without stream", json.dumps({"model": "local", "messages": [
        {"role": "user", "content": "안녕"}], "stream_options": {"include_usage": True}})),
    ("/v1/pii:detect", "empty text", json.dumps({"text": ""})),
    ("/v1/pii:detect", "2 MB of text", json.dumps({"text": "가" * 700_000})),
    ("/v1/pii:detect", "lone surrogate", '{"text": "성명 \\ud800 홍길동"}'),
    ("/v1/pii:detect", "unknown kind", json.dumps({"text": "홍길동", "kinds": ["dna"]})),
    ("/v1/pii:detect", "threshold 2", json.dumps({"text": "홍길동", "threshold": 2})),
    ("/v1/embeddings", "257 inputs", json.dumps({"input": ["가"] * 257, "model": "intfloat/multilingual-e5-small"})),
    ("/v1/embeddings", "token ids", json.dumps({"input": [[1, 2, 3]], "model": "intfloat/multilingual-e5-small"})),
    ("/v1/embeddings", "dimensions 7", json.dumps({"input": "가", "model": "intfloat/multilingual-e5-small",
                                                   "dimensions": 7})),
    ("/v1/ocr/jobs", "not base64", json.dumps({"documents": [{"content_base64": "!!!not base64!!!"}]})),
    ("/v1/ocr/jobs", "png bomb", json.dumps({"documents": [
        {"content_base64": base64.b64encode(png_bomb()).decode()}]})),
    ("/v1/ocr:extract", "truncated png", json.dumps({"content_base64": base64.b64encode(
        base64.b64decode(tiny_png())[:60]).decode()})),
    ("/v1/ocr:extract", "pdf bomb", json.dumps({"content_base64": base64.b64encode(pdf_bomb()).decode()})),
    ("/v1/ocr:extract", "30 MB upload", json.dumps({"content_base64": "A" * 30_000_000})),
    ("/v1/masking/jobs", "unknown kind", json.dumps({"documents": [{"content_base64": tiny_png()}],
                                                     "kinds": ["dna"]})),
    ("/v1/masking/jobs", "empty image", json.dumps({"documents": [{"content_base64": ""}]})),
    ("/v1/masking/jobs", "truncated png", json.dumps({"documents": [{"content_base64": base64.b64encode(
        base64.b64decode(tiny_png())[:60]).decode()}]})),
    ("/v1/masking/jobs", "pdf bomb", json.dumps({"documents": [
        {"content_base64": base64.b64encode(pdf_bomb()).decode()}]})),
    ("/v1/masking/jobs", "30 MB upload", json.dumps({"documents": [{"content_base64": "A" * 30_000_000}]})),
    ("/v1/tasks/{name}", "input not an object", json.dumps({"input": ["x"]})),
    ("/v1/tasks/{name}", "text a number", json.dumps({"input": {"text": 3}})),
    ("/v1/tasks/{name}", "reference_date not a date", json.dumps({"input": {"text": "면접",
                                                                           "reference_date": "어제"}})),
    ("/v1/tasks/{name}", "timezone ../etc", json.dumps({"input": {"text": "면접", "timezone": "../../etc/passwd"}})),
    ("/v1/tasks/{name}", "text 100k", json.dumps({"input": {"text": "가" * 100_000}})),
    ("/v1/tasks/{name}", "unknown model route", json.dumps({"input": {"text": "면접"}, "model": "huge"})),
    ("/v1/tasks/{name}:stream", "lone surrogate", '{"input": {"text": "면접 \\ud800"}}'),
    ("/v1/ocr/jobs", "languages ../etc", json.dumps({"documents": [{"content_base64": "aGVsbG8="}],
                                                     "languages": "../../etc"})),
]
TIMEOUTS = ("NaN", "1e400", "-1", "abc", "0", "99999999999999999999",
            "1")  # 1 ms: a legitimate 504, which must be logged and counted like any 5xx
BAD_HEADERS: list[dict[str, str | bytes]] = [{"X-Request-Timeout-Ms": v} for v in TIMEOUTS]
BAD_HEADERS += [{"X-Request-ID": "x" * 5000}, {"X-API-Key": b"\xff" * 10},
                {"Content-Type": "application/json; charset=latin-9"}]


@dataclass
class RestCase:
    """One bad REST request."""

    route: str
    what: str
    method: str
    path: str
    content: bytes | None = None
    headers: dict[str, str | bytes] = field(default_factory=dict)


def _fill(path: str, params: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(?::path)?\}", lambda m: params.get(m.group(1), "x"), path)


def _with_bad(template: dict[str, Any], key: str | None, raw_value: str | None, extra: bool = False) -> bytes:
    body = dict(template)
    if key is not None:
        if raw_value is None:
            body.pop(key)
        else:
            body[key] = BAD
    if extra:
        body["zz_unknown_field"] = 1
    text = json.dumps(body, ensure_ascii=False)
    if raw_value is not None:
        text = text.replace(json.dumps(BAD), raw_value)
    return text.encode()


def rest_cases(openapi: dict[str, Any], png: str) -> tuple[list[RestCase], list[str]]:
    """The REST corpus for every operation of ``openapi``; also the routes without a template."""
    known = templates(png)
    cases: list[RestCase] = []
    untemplated: list[str] = []
    json_ct: dict[str, str | bytes] = {"content-type": "application/json"}
    for path, ops in openapi["paths"].items():
        for method in ops:
            method = method.upper()
            route = f"{method} {path}"
            url = _fill(path, {**GOOD_PARAMS, "name": f"{SCRATCH}-gone"} if method == "DELETE" else good_params(path))
            for bad in BAD_PARAMS if "{" in path else []:
                bad_url = _fill(path, dict.fromkeys(("name", "job_id", "model_id", "interview_id",
                                                      "conversation_id", "session_id"), bad))
                cases.append(RestCase(route, f"path parameter {bad[:12]}", method, bad_url,
                                      b"{}" if method == "POST" else None, json_ct))
            if method != "POST":
                cases.append(RestCase(route, "as is", method, url))
                cases.append(RestCase(route, "junk query string", method, url + "?top_k=1e400&x=%ED%A0%80"))
                continue
            if (method, path) not in known:
                untemplated.append(route)
            template = known.get((method, path))
            big = 33_000_000 if "/documents" in path or "/ocr/" in path else 2_100_000
            generic: list[tuple[str, bytes, dict[str, str | bytes]]] = [
                ("malformed JSON", b'{"a": ', json_ct), ("empty body", b"", json_ct), ("null", b"null", json_ct),
                ("array", b"[]", json_ct), ("string", b'"x"', json_ct), ("number 1e400", b"1e400", json_ct),
                ("invalid UTF-8", b'{"query": "\xff\xfe\xed\xa0\x80"}', json_ct),
                ("nested 100000", b"[" * 100_000 + b"]" * 100_000, json_ct),
                ("nested objects 20000", b'{"a": ' * 20_000 + b"1" + b"}" * 20_000, json_ct),
                ("text/plain", json.dumps(template or {}).encode(), {"content-type": "text/plain"}),
                ("form", b"a=1&b=2", {"content-type": "application/x-www-form-urlencoded"}),
                ("oversize", b'{"x": "' + b"a" * big + b'"}', json_ct),
            ]
            cases += [RestCase(route, what, method, url, body, headers) for what, body, headers in generic]
            if isinstance(template, dict):
                cases.append(RestCase(route, "valid", method, url, _with_bad(template, None, None), json_ct))
                cases.append(RestCase(route, "unknown field", method, url, _with_bad(template, None, None, True),
                                      json_ct))
                for key in template:
                    cases.append(RestCase(route, f"{key} missing", method, url, _with_bad(template, key, None),
                                          json_ct))
                    for what, raw in BAD_VALUES.items():
                        cases.append(RestCase(route, f"{key} = {what}", method, url, _with_bad(template, key, raw),
                                              json_ct))
    for route_path, what, raw in NESTED_CASES:
        url = _fill(route_path, good_params(route_path))
        cases.append(RestCase(f"POST {route_path}", what, "POST", url, raw.encode(), json_ct))
    body = json.dumps(known[("POST", "/v1/search")]).encode()
    for headers in BAD_HEADERS:
        cases.append(RestCase("POST /v1/search", f"header {next(iter(headers))}", "POST", "/v1/search", body,
                              {**json_ct, **headers}))
    cases += [RestCase("unknown", "unknown path", "GET", "/v1/nothing-here"),
              RestCase("unknown", "wrong method", "PUT", "/v1/search", b"{}", json_ct),
              RestCase("unknown", "path traversal", "GET", "/v1/../../etc/passwd")]
    return cases, untemplated


@dataclass
class CorpusResult:
    """What the corpus got back."""

    rest_cases: int = 0
    rest_statuses: Counter[str] = field(default_factory=Counter)
    rest_plain_5xx: list[str] = field(default_factory=list)
    rest_json_500: list[str] = field(default_factory=list)
    rest_json_5xx_other: list[str] = field(default_factory=list)
    rest_slowest_s: float = 0.0
    rest_unsent: list[str] = field(default_factory=list)
    rest_5xx_logged: int = 0
    rest_5xx_counted: int = 0
    rest_5xx_seen: int = 0
    rest_5xx_seen_logged_routes: int = 0
    untemplated: list[str] = field(default_factory=list)
    grpc_cases: int = 0
    grpc_codes: Counter[str] = field(default_factory=Counter)
    grpc_internal: list[str] = field(default_factory=list)
    grpc_stalled: list[str] = field(default_factory=list)
    grpc_slowest_s: float = 0.0


QUIET = ("/healthz", "/readyz", "/metrics")  # counted in metrics, never written to the access log
CORPUS_LIMIT_S = 900.0  # the whole REST corpus, one case at a time; cases left when it passes are named unsent


def run_rest(base: str, cases: list[RestCase], out: CorpusResult, timeout_s: float = 40.0) -> None:
    """Send every case one at a time; count statuses, plain-text 5xx and JSON 500s (with the case named)."""

    def make(i: int) -> Request:
        case = cases[i]
        headers = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in case.headers.items()]
        return case.method, case.path, {"content": case.content, "headers": headers}

    load = run_load(base, len(cases), 1, make, timeout_s=timeout_s, time_limit_s=CORPUS_LIMIT_S)
    for case, outcome in zip(cases, load.outcomes, strict=True):
        if outcome.failure in ("unsent", NOT_SENT):  # the client refused to send it, or time ran out: named
            out.rest_unsent.append(f"{case.route} [{case.what}]: {outcome.error or outcome.failure}")
            continue
        if outcome.status is None:
            out.rest_statuses[outcome.failure] += 1
            out.rest_plain_5xx.append(f"{case.route} [{case.what}]: no answer ({outcome.failure})")
            continue
        out.rest_slowest_s = max(out.rest_slowest_s, outcome.latency_s)
        out.rest_statuses[outcome.key] += 1
        if outcome.status >= 500:
            out.rest_5xx_seen += 1
            out.rest_5xx_seen_logged_routes += not case.path.startswith(QUIET)
            named = f"{case.route} [{case.what}] -> {outcome.status}"
            if not outcome.json_body:
                out.rest_plain_5xx.append(named)
            elif outcome.status == 500:
                out.rest_json_500.append(named)
            else:  # 503/504 in the error body: a dependency or the deadline, answered as documented
                out.rest_json_5xx_other.append(named)
    out.rest_cases += len(cases)
