"""`/v1/answers` and derived queries (search `expand`) over the real embedding, retrieval and reasoning services.

All on port 0.

The LLM behind the reasoning service is the scripted OpenAI-compatible stand-in (bench/standin.py):
what is checked here is the gateway's part — the passages it packs, the citations it checks, the
floor, the rewrite and its fallback, the SSE order, degradation and bad input — which a model's
wording must not decide. The real model answers in tests/service/test_answers_llm.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio

from support import eventually_async, free_port, job_finished
from support.answering import answer_json, answering
from support.apps import asgi_client, gateway_app, parse_sse

pytestmark = pytest.mark.asyncio(loop_scope="session")
DOCS = [
    {"id": "hr-leave", "text": "연차 휴가는 입사 1년 후 15일이 주어집니다. 쓰지 못한 연차는 다음 해로 최대 5일까지 "
                               "이월할 수 있습니다. 이월한 연차는 3월 말까지 써야 합니다.",
     "payload": {"title": "휴가 규정", "domain": "hr"}},
    {"id": "hr-expense", "text": "출장비는 출장 후 7일 안에 영수증과 함께 청구합니다. 숙박비는 1박에 12만 원까지 "
                                 "지원합니다.", "payload": {"title": "경비 규정", "domain": "hr"}},
    {"id": "ship", "text": "주문한 책은 평일 오후 2시 전에 결제하면 당일 출고됩니다. 반품은 받은 날부터 14일 안에 "
                           "신청할 수 있습니다.", "payload": {"title": "배송 안내", "domain": "shipping"}},
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def catalog(embedding_service, retrieval_port):
    """Collection "policies" holding DOCS; the (embedding, retrieval) ports."""
    async with asgi_client(gateway_app(embedding_service.port, retrieval_port)) as http:
        r = await http.post("/v1/collections", json={"name": "policies", "fields": {"domain": "keyword"}})
        assert r.status_code == 201, r.text
        job = (await http.post("/v1/collections/policies/documents", json={"documents": DOCS})).json()
        assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
    return embedding_service.port, retrieval_port


def prompt_of(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"])


async def test_an_answer_cites_the_sentences_it_rests_on_and_numbers_naming_none_are_removed(catalog):
    script = [answer_json(True, "남은 연차는 최대 5일까지 이월됩니다 [1] <7>.", [2, 99])]
    async with answering(catalog, script) as (http, standin):
        r = await http.post("/v1/answers", json={"collection": "policies",
                                                 "question": "연차를 다음 해로 넘길 수 있나요?"})
        assert r.status_code == 200, r.text
        out = r.json()
    assert out["answerable"] and out["reason"] == "answered" and out["rewrite"]["status"] == "skipped"
    assert out["answer"] == "남은 연차는 최대 5일까지 이월됩니다."  # numbers written into the text are gone
    assert out["citations_removed"] == 1  # 99 names no sentence
    assert [(c["n"], c["sentence"]) for c in out["citations"]] == [(1, 2)]  # passage 1, its second sentence
    assert out["citations"][0]["text"] == "쓰지 못한 연차는 다음 해로 최대 5일까지 이월할 수 있습니다."
    assert out["support"]["check"] == "supported" and out["support"]["numbers_missing"] == []
    first = out["citations"][0]
    assert first["id"] == out["passages"][0]["id"] == "hr-leave" and first["payload"]["title"] == "휴가 규정"
    doc = next(d for d in DOCS if d["id"] == first["id"])
    assert doc["text"][first["start"]:first["end"]] == first["text"]
    prompt = prompt_of(standin.requests[0])
    assert "[1] (휴가 규정)\n<1> 연차 휴가는" in prompt and "<2> 쓰지 못한 연차는" in prompt
    assert "질문: 연차를 다음 해로 넘길 수 있나요?" in prompt
    # the answer is held to its schema by the backend: the request carries it
    assert standin.requests[0]["response_format"]["type"] == "json_schema"
    assert out["usage"]["llm_calls"] == 1 and out["timings"]["search_ms"] > 0


async def test_a_long_document_is_answered_from_the_passage_search_matched_and_cited_into_the_document(catalog):
    from test_retrieval_passages import TARGET, long_text

    text = long_text(target_at=4000, total=9000)
    async with answering(catalog, [answer_json(True, "매달 보름에 산꼭대기에서 관찰합니다.", [1])]) as (http, _):
        assert (await http.post("/v1/collections", json={"name": "manual", "fields": {}})).status_code == 201
        job = (await http.post("/v1/collections/manual/documents", json={"documents": [
            {"id": "handbook", "text": text, "payload": {"title": "사내 안내서"}}]})).json()
        assert (await job_finished(http, f"/v1/jobs/{job['id']}"))["state"] == "succeeded"
        r = await http.post("/v1/answers", json={"collection": "manual",
                                                 "question": "천체 관측 동아리는 언제 토성의 고리를 관찰하나요?"})
        assert r.status_code == 200, r.text
        out = r.json()
    p = out["passages"][0]
    assert p["id"] == "handbook" and p["start"] > 3000 and p["end"] - p["start"] <= 600 * 1.25, \
        "the passage search matched, not a window of the whole document"
    assert text[p["start"]:p["end"]] == p["text"] and TARGET in p["text"]
    c = out["citations"][0]
    assert c["id"] == "handbook" and text[c["start"]:c["end"]] == c["text"] and c["start"] >= p["start"]


async def test_the_model_saying_not_in_passages_is_answerable_false(catalog):
    async with answering(catalog, [answer_json(False, "", [])]) as (http, _):
        out = (await http.post("/v1/answers", json={"collection": "policies",
                                                    "question": "야근 수당은 얼마인가요?"})).json()
    assert not out["answerable"] and out["reason"] == "not_in_passages" and out["answer"] == "" and not out["citations"]
    assert out["passages"]  # what was searched is still shown


async def test_nothing_above_the_floor_answers_false_without_calling_the_llm(catalog):
    async with answering(catalog, [answer_json(True, "지어낸 답 [1]", [1])]) as (http, standin):
        out = (await http.post("/v1/answers", json={"collection": "policies", "question": "우주 정거장 도킹 절차",
                                                    "min_score": 0.99})).json()
    assert not out["answerable"] and out["reason"] == "no_passages" and out["passages"] == []
    assert out["dropped"]["below_floor"] == 3 and standin.requests == []


async def test_history_is_rewritten_into_a_standalone_question(catalog):
    script = [{"chunks": [json.dumps({"question": "반품은 며칠 안에 신청할 수 있나요?"}, ensure_ascii=False)]},
              answer_json(True, "받은 날부터 14일 안에 신청할 수 있습니다 [1].", [2])]
    history = [{"role": "user", "content": "책 배송은 언제 출고되나요?"},
               {"role": "assistant", "content": "평일 오후 2시 전 결제면 당일 출고됩니다."}]
    async with answering(catalog, script) as (http, standin):
        out = (await http.post("/v1/answers", json={"collection": "policies", "question": "그럼 반품은요?",
                                                    "history": history})).json()
    assert out["rewrite"]["status"] == "ok" and out["rewrite"]["query"] == "반품은 며칠 안에 신청할 수 있나요?"
    assert "그럼 반품은요?" in prompt_of(standin.requests[0]) and "책 배송은" in prompt_of(standin.requests[0])
    assert "질문: 반품은 며칠 안에 신청할 수 있나요?" in prompt_of(standin.requests[1])
    assert out["answerable"] and out["citations"][0]["id"] == "ship"


async def test_a_failed_rewrite_searches_the_turn_as_written_and_says_so(catalog):
    broken = {"chunks": ["이건 JSON이 아님"]}  # twice: the buffered call is regenerated once, then fails
    script = [broken, broken, answer_json(True, "받은 날부터 14일 안입니다 [1].", [2])]
    async with answering(catalog, script) as (http, _):
        out = (await http.post("/v1/answers", json={
            "collection": "policies", "question": "반품 신청 기한은요?",
            "history": [{"role": "user", "content": "배송 안내 좀"}, {"role": "assistant", "content": "네"}]})).json()
    rewrite = out["rewrite"]
    assert rewrite["status"] == "failed" and rewrite["query"] == "반품 신청 기한은요?" and rewrite["reason"]
    assert out["answerable"]


async def test_the_stream_sends_passages_then_the_checked_answer_then_done(catalog):
    answer = "출장비는 출장 후 7일 안에 \"영수증\"과 함께 청구합니다."
    async with answering(catalog, [answer_json(True, answer, [1])]) as (http, _):
        r = await http.post("/v1/answers:stream", json={"collection": "policies", "question": "출장비 청구 기한"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r)
    assert events[0][0] == "passages" and events[0][1]["passages"][0]["id"] == "hr-expense"
    assert [e for e, _ in events] == ["passages", "delta", "done"]  # the answer only once it passed the checks
    assert events[1][1]["text"] == answer
    assert events[-1][0] == "done" and events[-1][1]["answer"] == answer and events[-1][1]["citations"][0]["n"] == 1


async def test_answers_their_evidence_does_not_hold_are_unsupported_and_never_shown(catalog):
    script = [answer_json(True, "명성황후입니다.", [1]),  # a name from memory
              answer_json(True, "연차는 20일이 주어집니다.", [1]),  # a number its sentence does not hold
              answer_json(True, "연차 휴가는 입사 1년 후 15일이 주어집니다.", [1]),  # no term of the question
              answer_json(True, "대원군입니다.", []),  # no evidence named, and none holds it
              answer_json(True, "연차는 25일입니다.", [1])]  # streamed: never shown
    asked = [("연차 휴가는 며칠인가요?", "answer_not_in_evidence"),
             ("연차 휴가는 며칠인가요?", "number_not_in_evidence"),
             ("대한민국의 수도는 어디인가요?", "question_not_covered"),
             ("연차 휴가는 며칠인가요?", "no_evidence")]
    async with answering(catalog, script) as (http, _):
        for question, check in asked:
            out = (await http.post("/v1/answers", json={"collection": "policies", "question": question,
                                                        "min_score": 0})).json()
            assert not out["answerable"] and out["reason"] == "unsupported", out
            assert out["answer"] == "", out
            assert out["support"]["check"] == check and out["citations"] == [], out
        r = await http.post("/v1/answers:stream", json={"collection": "policies",
                                                        "question": "연차 휴가는 며칠인가요?"})
    events = parse_sse(r)
    assert [e for e, _ in events] == ["passages", "done"] and events[-1][1]["reason"] == "unsupported"
    assert events[-1][1]["support"]["numbers_missing"] == ["25일"]  # a number with its unit


async def test_passages_that_cannot_answer_are_refused_before_the_llm_is_asked(catalog):
    question = "연차 휴가는 며칠인가요?"
    async with answering(catalog, [answer_json(True, "15일입니다.", [1])],
                         answer_min_relevance=None) as (http, standin):
        out = (await http.post("/v1/answers", json={"collection": "policies", "question": question,
                                                    "min_relevance": 1.0})).json()  # nothing clears 1.0
        assert not out["answerable"] and out["reason"] == "not_relevant" and standin.requests == []
        rel = out["relevance"]
        assert rel["threshold"] == 1.0 and 0 <= rel["score"] < 1 and set(rel["features"]) == {
            "cos1", "margin", "cover_top", "cover_all", "legs_agree"}
        assert rel["features"]["cover_all"] == 1.0  # 연차, 휴가: both in the passages
        s = await http.post("/v1/answers:stream", json={"collection": "policies", "question": question,
                                                        "min_relevance": 1.0})
        assert [e for e, _ in parse_sse(s)] == ["passages", "done"] and standin.requests == []
        out = (await http.post("/v1/answers", json={"collection": "policies", "question": question,
                                                    "min_relevance": 0})).json()  # 0: the model is always asked
        assert out["answerable"] and out["relevance"]["threshold"] == 0 and len(standin.requests) == 1


async def test_the_llm_down_is_a_503_and_an_error_event(catalog):
    async with answering(catalog, [{"status": 500}]) as (http, _):
        r = await http.post("/v1/answers", json={"collection": "policies", "question": "연차 이월"})
        assert r.status_code == 503, r.text
        s = await http.post("/v1/answers:stream", json={"collection": "policies", "question": "연차 이월"})
    events = parse_sse(s)
    assert events[0][0] == "passages" and events[-1][0] == "error"


async def _held(http, standin, path: str, body: dict) -> asyncio.Task:
    """A request started in the background, returned once the stand-in LLM has it (so it holds its slots)."""
    task = asyncio.create_task(http.post(path, json=body))
    await eventually_async(lambda: len(standin.requests), lambda n: n >= 1, timeout_s=20, what="the LLM called")
    return task


async def test_answers_over_the_llm_cap_are_429_with_retry_after(catalog):
    slow = {**answer_json(True, "15일입니다 [1].", [1]), "first_delay_s": 1.5}
    async with answering(catalog, [slow], max_inflight_llm=1, shed_wait_s=0.1) as (http, standin):
        first = await _held(http, standin, "/v1/answers", {"collection": "policies", "question": "연차 휴가 일수"})
        r = await http.post("/v1/answers", json={"collection": "policies", "question": "출장비 청구 기한"})
        assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
        assert r.json()["error"]["code"] == "overloaded"
        assert (await first).status_code == 200  # the one in flight is untouched
        assert len(standin.requests) == 1


async def test_an_overloaded_reasoning_service_is_429_and_an_answer_broken_twice_is_502(catalog):
    slow = {**answer_json(True, "15일입니다 [1].", [1]), "first_delay_s": 1.5}
    async with answering(catalog, [slow], reasoning={"max_concurrent_calls": 1}) as (http, standin):
        first = await _held(http, standin, "/v1/answers", {"collection": "policies", "question": "연차 휴가 일수"})
        r = await http.post("/v1/answers", json={"collection": "policies", "question": "출장비 청구 기한"})
        assert r.status_code == 429 and "Retry-After" in r.headers, r.text  # RESOURCE_EXHAUSTED, as elsewhere
        assert (await first).status_code == 200
    broken = {"chunks": [json.dumps({"answerable": "네", "answer": 3, "citations": "1"}, ensure_ascii=False)]}
    async with answering(catalog, [broken, broken]) as (http, standin):
        r = await http.post("/v1/answers", json={"collection": "policies", "question": "연차 휴가 일수"})
        assert r.status_code == 502 and r.json()["error"]["code"] == "invalid_output", r.text
        assert len(standin.requests) == 2  # regenerated once, then refused: never returned as an answer


async def test_embedding_down_answers_from_a_keyword_search_marked_degraded(catalog):
    async with answering(catalog, [answer_json(True, "15일입니다 [1].", [1])], embedding=free_port()) as (http, _):
        r = await http.post("/v1/answers", json={"collection": "policies", "question": "연차 휴가 일수",
                                                 "min_score": 0.9})
        out = r.json()
    assert r.status_code == 200 and out["degraded"] and out["search_mode"] == "keyword"
    assert out["answerable"] and out["passages"][0]["id"] == "hr-leave"  # no cosine to floor on: keyword hits kept
    assert r.headers["X-Mesh-Degraded"] == "1"


@pytest.mark.parametrize("body, status, field", [
    ({"collection": "policies", "question": ""}, 400, "question"),
    ({"collection": "policies", "question": "가" * 2001}, 400, "question"),
    ({"collection": "policies", "question": "연차", "history": [{"role": "system", "content": "x"}]}, 400,
     "history[0].role"),
    ({"collection": "policies", "question": "연차", "top_k": 11}, 400, "top_k"),
    ({"collection": "policies", "question": "연차", "min_score": 2}, 400, "min_score"),
    ({"collection": "nope", "question": "연차"}, 404, None),
    ({"collection": "policies", "question": "연차", "model": "no-such-route"}, 404, None),
])
async def test_bad_input_is_a_4xx_naming_the_field(catalog, body, status, field):
    async with answering(catalog, [answer_json(True, "x", [])]) as (http, standin):
        for path in ("/v1/answers", "/v1/answers:stream"):
            r = await http.post(path, json=body)
            assert r.status_code == status, r.text
            if field:
                assert field in [f["field"] for f in r.json()["error"]["fields"]]
        assert standin.requests == []


# Derived queries (search `expand`, recommendations) on the same stand-in LLM.

async def test_expand_on_a_deadline_too_short_for_the_model_is_refused_up_front(catalog):
    async with answering(catalog, [{"chunks": ['{"queries": ["연차 넘기기", "휴가 이월"]}']}],
                         expand_min_s=3.0) as (http, standin):
        r = await http.post("/v1/search", json={"collection": "policies", "query": "연차 이월", "expand": {"n": 3}})
        assert r.status_code == 400 and r.json()["error"]["fields"][0]["field"] == "expand", r.text
        assert "6250" in r.json()["error"]["message"] and standin.requests == []
        r = await http.post("/v1/search", headers={"X-Request-Timeout-Ms": "6250"},
                            json={"collection": "policies", "query": "연차 이월", "expand": {"n": 3}})
        assert r.status_code == 200 and r.json()["expansion"]["status"] == "ok", r.text


async def test_expand_searches_the_query_and_the_derived_ones(catalog):
    script = [{"chunks": [json.dumps({"queries": ["남은 휴가 넘기기", "연차 이월 한도"]}, ensure_ascii=False)]}]
    async with answering(catalog, script) as (http, standin):
        r = await http.post("/v1/search", json={"collection": "policies", "query": "연차 이월", "expand": {"n": 3}})
        assert r.status_code == 200, r.text
        out = r.json()
    assert [(q["query"], q["source"]) for q in out["queries"]] == [
        ("연차 이월", "given"), ("남은 휴가 넘기기", "derived"), ("연차 이월 한도", "derived")]
    assert out["expansion"]["status"] == "ok" and out["expansion"]["derived"] == 2
    assert out["hits"][0]["id"] == "hr-leave" and out["hits"][0]["matched_queries"][0] == 0
    schema = standin.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["queries"]["minItems"] == 2  # n - 1 derived, the original always searched


async def test_a_failed_expansion_searches_the_query_alone_marked(catalog):
    async with answering(catalog, [{"status": 500}]) as (http, _):
        r = await http.post("/v1/search", json={"collection": "policies", "query": "반품 기한", "expand": {"n": 4}})
        assert r.status_code == 200, r.text
        out = r.json()
        rec = await http.post("/v1/recommendations", json={"collection": "policies", "query": "반품 기한",
                                                            "reasons": False, "expand": {"n": 2}})
    assert out["expansion"]["status"] == "failed" and out["expansion"]["reason"]
    assert [q["query"] for q in out["queries"]] == ["반품 기한"] and out["hits"][0]["id"] == "ship"
    assert rec.status_code == 200 and rec.json()["expansion"]["status"] == "failed"
    assert rec.json()["cards"][0]["id"] == "ship" and rec.json()["queries"] == ["반품 기한"]


async def test_derived_queries_over_the_llm_cap_are_skipped_and_the_query_searched_at_once(catalog):
    slow = {"chunks": [json.dumps({"queries": ["남은 휴가 넘기기"]}, ensure_ascii=False)], "first_delay_s": 0.6}
    async with answering(catalog, [slow], max_inflight_llm=1) as (http, standin):
        first = await _held(http, standin, "/v1/search", {"collection": "policies", "query": "연차 이월",
                                                            "expand": {"n": 2}})
        r = await http.post("/v1/search", json={"collection": "policies", "query": "반품 기한", "expand": {"n": 2}})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["expansion"]["status"] == "failed" and out["expansion"]["reason"] == "overloaded"
        assert out["hits"][0]["id"] == "ship" and len(standin.requests) == 1  # no second LLM call
        assert (await first).status_code == 200


async def test_recommendations_reason_over_the_merged_hits_of_derived_queries(catalog):
    script = [{"chunks": [json.dumps({"queries": ["출장 숙박 지원"]}, ensure_ascii=False)]}, {"status": 500}]
    async with answering(catalog, script) as (http, standin):
        r = await http.post("/v1/recommendations", json={"collection": "policies", "query": "출장비",
                                                          "expand": {"n": 2}, "top_k": 2})
        assert r.status_code == 200, r.text
        out = r.json()
    assert out["queries"] == ["출장비", "출장 숙박 지원"] and out["expansion"]["status"] == "ok"
    assert out["cards"][0]["id"] == "hr-expense"
    # The derived queries, then one reasons call per card of the merged hits (each refused by the backend:
    # with no card written at all, the reasons fail as a whole instead of giving code's reason to each).
    assert len(standin.requests) == 1 + len(out["cards"])
    assert out["reasons_status"] == "failed"
