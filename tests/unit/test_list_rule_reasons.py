"""Code's reason for a listed item whose query's model reason failed (gateway/conversations/reasons.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.conversations.reasons import RULE_CHARS, rule_reason

PROFILE = {"recipient": "고모", "occasion": "생신", "budget_min": None, "budget_max": 60000,
           "categories": ["담요", "머그컵"], "must_have": ["캐릭터"], "forbidden": ["가죽"],
           "excluded_categories": ["스카프"]}


def test_it_names_who_what_for_the_wish_met_what_it_is_and_the_price_against_the_budget():
    text = rule_reason(PROFILE, "[담요] 울 블렌드 체크 담요, 고급 선물 포장", {"category": "담요", "price": 52000,
                                                                    "tags": ["고급"]})
    assert text == "고모 생신 선물 · 원하신 담요 · 울 블렌드 체크 담요, 고급 선물 포장 · 52,000원, 예산 안"


def test_a_wished_attribute_counts_and_an_item_over_the_budget_is_not_called_inside_it():
    text = rule_reason(PROFILE, "[머그컵] 캐릭터 머그컵과 티스푼", {"category": "머그컵", "price": 76000,
                                                             "tags": ["캐릭터"]})
    assert "원하신 머그컵·캐릭터" in text and text.endswith("76,000원")


def test_nothing_refused_is_named_and_the_self_list_is_for_the_person():
    text = rule_reason(PROFILE, "[초콜릿] 견과류 초콜릿 바 선물 상자", {"category": "초콜릿", "price": 24000},
                       for_self=True)
    assert text.startswith("나를 위한 선물 · 견과류 초콜릿 바 선물 상자") and "원하신" not in text
    for refused in ("가죽", "스카프", "고모"):
        assert refused not in text


def test_other_payload_field_names_and_tags_written_as_text():
    text = rule_reason({"recipient": "친구", "budget_min": 30000, "budget_max": None, "must_have": ["비건"]},
                       "비건 다크 초콜릿 6종 세트", {"분류": "초콜릿", "가격": 28000, "속성": "비건/세트"},
                       category_field="분류", price_field="가격", tags_field="속성")
    assert text == "친구 선물 · 원하신 비건 · 비건 다크 초콜릿 6종 세트 · 28,000원"  # under the 3만 원 floor


@given(st.text(max_size=300), st.one_of(st.none(), st.integers(-5, 10**9), st.text(max_size=5)),
       st.lists(st.text(max_size=10), max_size=5))
def test_any_item_gives_a_bounded_reason(title, price, tags):
    text = rule_reason(PROFILE, title, {"category": "담요", "price": price, "tags": tags})
    assert len(text) <= RULE_CHARS and text.startswith("고모 생신 선물")


class _Call:
    """What open_structured returns (a stand-in: the value the grammar closed, no model)."""

    def __init__(self, value: dict) -> None:
        self.value, self.usage = value, None

    async def deltas(self):
        yield ""


async def test_a_text_the_grammar_closed_at_its_cap_is_cut_short_and_never_shown(monkeypatch):
    from gateway.conversations import finish
    from gateway.conversations.reasons import REASON_CHARS, REASON_SCHEMA

    async def opened(*args, **kwargs):
        return _Call({"reason": said})

    monkeypatch.setattr(finish, "open_structured", opened)
    lists = finish.Finish.__new__(finish.Finish)
    lists.routes, lists.route = type("Routes", (), {"get": staticmethod(lambda name: None)})(), "r"
    cut = "형 이사 선물로 머그컵과 담요를 추천합니다. 캐릭터 머그컵은 형의 취향을 반"
    said = cut[:REASON_CHARS].ljust(REASON_CHARS, "반")
    assert await lists._text([], REASON_SCHEMA, "reason", "k", 1.0, 10) == (None, f"cut at {REASON_CHARS} characters",
                                                                             None)
    said = "형 이사에 쓰기 좋은 머그컵과 담요예요."
    assert await lists._text([], REASON_SCHEMA, "reason", "k", 1.0, 10) == (said, None, None)
