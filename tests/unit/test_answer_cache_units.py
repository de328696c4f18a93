"""The answer cache's parts without services: code's same-question rules and the store's lookups.

Examples here are written for these tests (a bakery's and a gym's rules), not taken from the
semantic-cache sets the threshold was chosen and reported on.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.answers.cache import AnswerCache
from gateway.answers.sameneed import question_numbers, same_need
from gateway.tasks.store import KeyValue, MemoryKeyValue, StoreUnavailable
from services.runtime.korean.numbers import NATIVE_UNITS

PASSAGES = ("빵집 정기 구독은 한 달에 4만 원이며 주 2회 배송됩니다. 구독을 해지하면 남은 기간의 금액은 7일 안에 "
            "환불됩니다. 케이크 예약은 3일 전까지 해야 하고, 마카롱 세트는 당일 주문도 됩니다.")
CITED = "케이크 예약은 3일 전까지 해야 하고, 마카롱 세트는 당일 주문도 됩니다."
CACHED = "케이크는 며칠 전까지 예약해야 하나요?"
NATIVE = {word: value for word, value in NATIVE_UNITS.items() if word in ("한", "두", "세", "네", "다섯", "여섯",
                                                                       "일곱", "여덟", "아홉")}


@given(st.sampled_from(sorted(NATIVE)), st.sampled_from(["달", "개월", "번", "명"]))
def test_a_native_numeral_before_a_unit_is_the_digits_value(word, unit):
    digits_unit = {"달": "개월"}.get(unit, unit)
    in_words = question_numbers(f"입사한 지 {word} {unit} 됐어요")
    assert in_words == question_numbers(f"입사한 지 {NATIVE[word]}{digits_unit} 됐어요")


@given(st.integers(1, 99))
def test_man_won_in_words_and_digits_read_alike(n):
    assert question_numbers(f"{n}만 원이면 되나요") == {f"{n * 10000}원"}
    assert question_numbers(f"{n}만 원이면 되나요") != question_numbers(f"{n + 1}만 원이면 되나요")


def test_a_reworded_question_is_the_same_need():
    assert same_need("케이크 예약은 며칠 전까지 해야 돼요?", CACHED, PASSAGES, CITED) is None
    assert same_need(CACHED, CACHED, PASSAGES, CITED) is None


def test_another_number_is_refused():
    assert same_need("케이크는 2일 전에 예약해도 되나요?", CACHED, PASSAGES, CITED) == "numbers"


def test_another_thing_the_passages_hold_is_refused():
    # 구독 is in the passages but not in the sentence the answer cites.
    assert same_need("구독은 며칠 전까지 예약해야 하나요?", CACHED, PASSAGES, CITED) == "new_term"


def test_a_cited_term_put_aside_for_another_is_refused():
    # 마카롱 is in the cited sentence: the question dropped 케이크 for it.
    assert same_need("마카롱은 며칠 전까지 예약해야 하나요?", CACHED, PASSAGES, CITED) == "replaced_term"
    # A term no passage holds in place of a cited one (another kind of cake the bakery never named).
    assert same_need("타르트는 며칠 전까지 예약해야 하나요?", CACHED, PASSAGES, CITED) == "replaced_term"


def test_a_question_asking_for_another_kind_of_answer_is_refused():
    """Answers split E served "유자 크루아상" for "…부산점은 어디에 있어?" (cached: "…대표 메뉴가 뭐야?")."""
    shop = "솔빛베이커리 부산점은 2022년 해운대에 문을 열었다. 이 매장의 대표 메뉴는 유자 크루아상이다."
    menu = "솔빛베이커리 부산점 대표 메뉴가 뭐야?"
    assert same_need("솔빛베이커리 부산점은 어디에 있어?", menu, shop, shop) == "asks"
    assert same_need("케이크는 몇 시까지 예약해야 하나요?", CACHED, PASSAGES, CITED) == "asks"
    assert same_need("솔빛베이커리 부산점 위치가 어디야?", "솔빛베이커리 부산점은 어디에 있어?", shop, shop) is None


def vec(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


RESPONSE = {"answer": "3일 전까지 예약해야 합니다.", "passages": [{"text": PASSAGES}], "citations": [{"text": CITED}]}


def cache(store: KeyValue | None = None, **options) -> AnswerCache:
    return AnswerCache(store or MemoryKeyValue(), **{"threshold": 0.9, "ttl_s": 60, "max_entries": 10, **options})


def test_a_stored_answer_is_found_by_a_close_vector_and_checked_by_code():
    async def run():
        c = cache()
        gen = await c.generation("bakery")
        await c.put("bakery", gen, "s", CACHED, vec(1, 0, 0), RESPONSE)
        hit = await c.find("bakery", gen, "s", "케이크 예약은 며칠 전까지 해야 돼요?", vec(0.95, 0.31, 0))
        assert hit is not None and hit.response["answer"] == RESPONSE["answer"] and hit.question == CACHED
        assert hit.similarity == pytest.approx(0.95, abs=0.01)
        assert await c.find("bakery", gen, "s", CACHED, vec(0.5, 0.87, 0)) is None  # below the threshold
        assert await c.find("bakery", gen, "s", "케이크는 2일 전에 예약해도 되나요?", vec(1, 0, 0)) is None  # code
        assert await c.find("bakery", gen, "other-scope", CACHED, vec(1, 0, 0)) is None
        assert await c.find("gym", gen, "s", CACHED, vec(1, 0, 0)) is None
    asyncio.run(run())


def test_a_change_gives_a_new_generation_and_a_full_cache_takes_no_more():
    async def run():
        c = cache(max_entries=1)
        gen = await c.generation("bakery")
        assert await c.generation("bakery") == gen
        await c.put("bakery", gen, "s", CACHED, vec(1, 0, 0), RESPONSE)
        await c.put("bakery", gen, "s", "구독료는 얼마인가요?", vec(0, 1, 0), RESPONSE)
        assert await c.find("bakery", gen, "s", "구독료는 얼마인가요?", vec(0, 1, 0)) is None  # not stored: full
        await c.changed("bakery")
        new = await c.generation("bakery")
        assert new != gen and await c.find("bakery", new, "s", CACHED, vec(1, 0, 0)) is None
    asyncio.run(run())


class DownStore(MemoryKeyValue):
    """A store whose every call fails as an unreachable Redis does (injected failure)."""

    async def hgetall(self, key: str) -> dict[str, str]:
        raise StoreUnavailable("redis: ConnectionError")

    async def hset(self, key: str, field: str, value: str, ttl_s: int) -> None:
        raise StoreUnavailable("redis: ConnectionError")


def test_a_store_that_does_not_answer_is_a_miss_not_an_error():
    async def run():
        c = cache(DownStore())
        assert await c.generation("bakery") is None
        assert await c.find("bakery", "g", "s", CACHED, vec(1, 0, 0)) is None
        await c.put("bakery", "g", "s", CACHED, vec(1, 0, 0), RESPONSE)  # counted, not raised
        await c.changed("bakery")
    asyncio.run(run())
