"""QueryVectors (gateway/vectors/query.py): the cache, the breaker and the budget share around embedding.

The embedding client here is support.standins.StandInEmbeddingClient: it implements the real
client's async interface and raises the real ``clients.errors`` exceptions, to inject failures.
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from clients.errors import FieldViolation, InvalidArgument, Unavailable
from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError
from gateway.vectors.breaker import CircuitBreaker
from gateway.vectors.cache import LocalLruCache, cache_key
from gateway.vectors.query import MIN_TELLING_BUDGET_S, QueryVectors
from support.standins import StandInEmbeddingClient, deadline_exceeded, unavailable

pytestmark = pytest.mark.asyncio(loop_scope="session")


def vectors(client: StandInEmbeddingClient, failures: int = 3, share: float = 0.4) -> QueryVectors:
    return QueryVectors(client, LocalLruCache(100), CircuitBreaker(failures, reset_s=3600), share)


async def test_a_second_lookup_is_a_cache_hit_carrying_the_revision():
    client = StandInEmbeddingClient(revision="rev-a")
    qv = vectors(client)
    first = await qv.lookup("비 오는 날 읽기 좋은 소설", Deadline(5))
    assert not first.cache_hit and first.reason == "" and first.vector is not None
    assert first.vector.revision == "rev-a"
    np.testing.assert_allclose(first.vector.values, client.vector_of("비 오는 날 읽기 좋은 소설"))
    second = await qv.lookup("비 오는  날 읽기 좋은 소설 ", Deadline(5))  # same text once normalised
    assert second.cache_hit and second.vector is not None and second.vector.revision == "rev-a"
    np.testing.assert_allclose(second.vector.values, first.vector.values)
    assert len(client.embed_calls) == 1 and client.info_calls == 1 and qv.revision == "rev-a"
    assert await qv.cache.get(cache_key("rev-a", "query", "비 오는 날 읽기 좋은 소설")) is not None


async def test_a_new_model_revision_is_never_served_from_the_old_revisions_cache():
    client = StandInEmbeddingClient(revision="rev-a")
    qv = vectors(client)
    await qv.lookup("무선 청소기", Deadline(5))
    client.revision = "rev-b"  # the embedding service now serves another model
    other = await qv.lookup("면접 질문", Deadline(5))
    assert other.vector is not None and other.vector.revision == "rev-b"
    again = await qv.lookup("무선 청소기", Deadline(5))  # cached under rev-a only: embedded again
    assert not again.cache_hit and again.vector is not None and again.vector.revision == "rev-b"
    assert client.info_calls == 2 and qv.revision == "rev-b" and len(client.embed_calls) == 3


async def test_the_embed_call_gets_its_share_of_the_budget():
    client = StandInEmbeddingClient()
    qv = vectors(client, share=0.4)
    await qv.lookup("책", Deadline(10))
    (_, kind, timeout_s), = client.embed_calls
    assert kind == "query" and timeout_s is not None and 3.9 < timeout_s <= 4.0


async def test_failures_open_the_breaker_then_lookups_stop_calling_embedding():
    client = StandInEmbeddingClient([unavailable()])
    qv = vectors(client, failures=2)
    reasons = [(await qv.lookup(f"질문 {i}", Deadline(5))).reason for i in range(4)]
    assert reasons == ["unavailable", "unavailable", "breaker_open", "breaker_open"]
    assert len(client.embed_calls) == 2 and qv.breaker.state == "open"


async def test_a_deadline_too_short_to_tell_anything_does_not_count_against_the_breaker():
    client = StandInEmbeddingClient([deadline_exceeded()])
    qv = vectors(client, failures=1, share=0.4)
    short = Deadline(MIN_TELLING_BUDGET_S)  # 40% of it is far below what a healthy service needs
    out = await qv.lookup("책", short)
    assert out.reason == "deadline_exceeded" and out.vector is None
    assert qv.breaker.state == "closed"
    assert client.embed_calls[-1][2] < MIN_TELLING_BUDGET_S
    out = await qv.lookup("책", Deadline(10))  # a generous budget that still ran out does count
    assert out.reason == "deadline_exceeded" and qv.breaker.state == "open"


@pytest.mark.parametrize("violations", [[FieldViolation("texts[0]", "must not be blank")], []])
async def test_invalid_text_is_a_400_naming_the_rest_field_and_does_not_trip_the_breaker(violations):
    bad = InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, "texts[0] must not be blank", violations)
    client = StandInEmbeddingClient([unavailable(), bad])
    qv = vectors(client, failures=2)
    assert (await qv.lookup("a", Deadline(5))).reason == "unavailable"  # one failure on the count
    with pytest.raises(ApiError) as info:
        await qv.lookup(" ", Deadline(5))
    assert info.value.status == 400
    error = info.value.body.error
    assert error.code == "invalid_argument" and [f.field for f in error.fields] == ["query"]
    assert qv.breaker.state == "closed" and qv.breaker._failures == 0  # the service answered
    with pytest.raises(ApiError) as info:
        await qv.lookup(" ", Deadline(5), field="input")
    assert [f.field for f in info.value.body.error.fields] == ["input"]


async def test_an_unreachable_info_call_counts_and_the_lookup_still_tries_to_embed():
    client = StandInEmbeddingClient(info_error=unavailable())
    qv = vectors(client, failures=2)
    out = await qv.lookup("책", Deadline(5))
    assert out.vector is not None and out.vector.revision == client.revision and not out.cache_hit
    assert client.info_calls == 1 and qv.breaker.state == "closed"  # the embed call's success closed it again
    strict = vectors(StandInEmbeddingClient(info_error=unavailable()), failures=1)
    assert (await strict.lookup("책", Deadline(5))).reason == "breaker_open"  # the info failure was counted


async def test_an_expired_request_deadline_is_a_504_before_any_call():
    client = StandInEmbeddingClient()
    qv = vectors(client)
    spent = Deadline(1, start=Deadline(1).start - 2)
    with pytest.raises(ApiError) as info:
        await qv.lookup("책", spent)
    assert info.value.status == 504 and info.value.body.error.retryable
    assert client.embed_calls == []


async def test_close_leaves_the_client_to_its_owner():
    client = StandInEmbeddingClient()
    qv = vectors(client)
    await qv.close()
    assert not client.closed  # the composition root closes each client once


async def test_batch_embeddings_go_through_the_breaker_and_an_open_one_is_a_503():
    client = StandInEmbeddingClient([unavailable(), unavailable()])
    qv = vectors(client, failures=2)
    for _ in range(2):
        with pytest.raises(Unavailable):  # the client's own error passes through to the error table
            await qv.embed_batch(["책", "여행"], "passage", Deadline(2.0))
    assert qv.breaker.state == "open"
    with pytest.raises(ApiError) as refused:
        await qv.embed_batch(["책"], "passage", Deadline(2.0))
    assert refused.value.status == 503 and refused.value.body.error.retryable


async def test_a_too_short_info_call_does_not_count_against_the_breaker_either():
    client = StandInEmbeddingClient([deadline_exceeded()], info_error=deadline_exceeded())
    qv = vectors(client, failures=1, share=0.4)
    out = await qv.lookup("책", Deadline(MIN_TELLING_BUDGET_S))
    assert out.reason == "deadline_exceeded"
    assert qv.breaker.state == "closed"


async def test_two_models_side_by_side_each_revision_from_its_own_instance_and_cache_entries():
    """During a model change: the instance serving a collection's revision embeds its queries; a shared
    cache never hands one model's vector to the other; a revision no instance serves is left to retrieval."""
    from gateway.vectors.revisions import VectorSources

    cache = LocalLruCache(100)
    old_client, new_client = StandInEmbeddingClient(revision="rev-a"), StandInEmbeddingClient(revision="rev-b")
    old = QueryVectors(old_client, cache, CircuitBreaker(3, reset_s=3600), 0.4)
    new = QueryVectors(new_client, cache, CircuitBreaker(3, reset_s=3600), 0.4)
    sources = VectorSources(old, [new])
    assert await sources.serving("rev-b", Deadline(5)) is new and await sources.serving("rev-a", Deadline(5)) is old
    assert await sources.serving("rev-z", Deadline(5)) is None  # retrieval embeds it with the instance it knows
    a = await old.lookup("겨울 캠핑 용품", Deadline(5))
    b = await new.lookup("겨울 캠핑 용품", Deadline(5))
    assert not b.cache_hit and b.vector is not None and b.vector.revision == "rev-b"
    assert a.vector is not None and a.vector.revision == "rev-a" and len(new_client.embed_calls) == 1
    assert (await new.lookup("겨울 캠핑 용품", Deadline(5))).cache_hit  # each model's entry, hit by its own
    # The default instance down and its revision unknown: it is used anyway, so the search says why it degraded.
    down = QueryVectors(StandInEmbeddingClient(revision="rev-a", info_error=unavailable()),
                        LocalLruCache(10), CircuitBreaker(3, reset_s=3600), 0.4)
    assert await VectorSources(down, [new]).serving("rev-a", Deadline(5)) is down
