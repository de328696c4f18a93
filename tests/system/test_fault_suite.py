"""The fault suite's fast tier (``python -m bench.faults --quick``) with the issue's targets asserted.

The whole mesh as processes on loopback (Redis, embedding, retrieval, OCR, reasoning over the scripted
chat stand-in, gateway on Redis), then: ingest during a reindex, a small c=64 overload, and the
bad-input corpus over every REST route and gRPC method. The suite runs once for the module; each
target is its own test, so a defect the suite reveals fails (or is marked) on its own.
"""

import pytest

from bench.faults import run_suite

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    out = run_suite(quick=True, folder=tmp_path_factory.mktemp("faults"), log=lambda _: None)
    for key, scenario in out["scenarios"].items():
        assert "error" not in scenario, (key, scenario)
    return out["scenarios"]


def test_nothing_acknowledged_during_a_reindex_is_lost(figures):
    s = figures["3_ingest_during_reindex"]
    assert s["overlapped_rounds"] >= 1, s  # the ingest really ran while the reindex did
    assert s["lost"] == 0 and s["unfinished"] == 0, s
    assert all(r["acknowledged"] > 0 and r["ingest"] == "succeeded" for r in s["rounds"]), s


def test_overload_answers_only_200_or_429_with_retry_after(figures):
    # Statuses only: the "within 2x the deadline" share is a speed figure, reported by the bench command
    # (`python -m bench.faults`), not asserted on a shared machine.
    s = figures["6_overload"]
    assert set(s["gateway_statuses"]) <= {"200", "429"}, s  # what the gateway answered, from its access lines
    answered = {k for k in s["statuses"] if k.isdigit()}
    assert answered <= {"200", "429"} and s["429_without_retry_after"] == 0, s
    # The load generator shares two cores with the whole mesh; a connection it saw closed without an
    # answer (once in 192 in one CI run, never in 10 runs here) is reported with the client's error in
    # the figures, and tolerated at one request in a hundred, not more.
    assert s["unanswered_count"] <= s["requests"] // 100, s["unanswered"]


def test_the_rest_corpus_gets_no_plain_text_5xx_and_no_500(figures):
    s = figures["7_bad_input"]
    assert s["rest_routes"] >= 20 and not s["untemplated_routes"] and not s["rest_unsent"], s
    assert s["rest_plain_5xx"] == 0 and s["rest_json_500"] == 0, s["rest_5xx_cases"]


def test_every_5xx_the_gateway_answered_is_logged_and_counted(figures):
    s = figures["7_bad_input"]
    assert s["rest_5xx_seen"] >= 1, s  # the corpus's 1 ms deadline makes at least one legitimate 504
    assert s["rest_5xx_logged"] == s["rest_5xx_seen_logged_routes"], s
    assert s["rest_5xx_counted"] == s["rest_5xx_seen"], s


def test_no_grpc_call_of_the_corpus_runs_past_its_deadline(figures):
    s = figures["7_bad_input"]
    assert s["grpc_methods"] == 22 and s["grpc_cases"] >= 100, s
    assert s["grpc_stalled"] == [], s["grpc_stalled"]


KNOWN_INTERNAL = "reasoning.Generate [#7"  # json_schema nested 10,000 deep: RecursionError in the servicer


def test_no_grpc_internal_besides_the_known_defect(figures):
    s = figures["7_bad_input"]
    assert [c for c in s["grpc_internal_cases"] if not c.startswith(KNOWN_INTERNAL)] == [], s["grpc_internal_cases"]


def test_no_grpc_internal_or_unknown_on_the_corpus(figures):
    s = figures["7_bad_input"]
    assert s["grpc_internal"] == 0, s["grpc_internal_cases"]
