"""What a shopper would read (issue 81): substance checks, the rule-written reason, a list reason's items."""

from __future__ import annotations

from gateway.conversations.confirm import off_items
from services.reasoning.cards import ItemIn
from services.reasoning.fallback import rule_reason
from services.reasoning.substance import apart_words, same_reason, substance

WALLET = ("30대 남성 생일 선물 가죽 카드지갑, 이니셜 각인 가능", "category: 선물, price: 45000")
CUSHION = ("부모님 결혼기념일 선물로 좋은 커플 안마 쿠션", "category: 선물, price: 89000")
CANDLE = ("은은한 우디 향 캔들과 디퓨저 집들이 선물 세트", "category: 선물, price: 35000")


def kinds(short: str, long: str, item, query: str, others) -> list[str]:
    return [f.kind for f in substance(short, long, title=item[0], description=item[1], query=query, others=others)]


def test_a_reason_that_names_what_sets_the_item_apart_and_why_it_fits_passes():
    assert kinds("부모님 두 분이 함께 쓰는 안마 쿠션", "결혼기념일 저녁에 나란히 앉아 피로를 풀 수 있습니다.",
                 CUSHION, "부모님 결혼기념일 선물 10만 원 이하", [WALLET, CANDLE]) == []


def test_a_reason_true_of_any_item_names_no_property():
    found = kinds("부모님께 가족의 생일을 맞추는 선물", "특별한 날에 마음을 전하기 좋은 선물입니다.", CANDLE,
                  "부모님 결혼기념일 선물 10만 원 이하", [WALLET, CUSHION])
    assert "no_property" in found


def test_a_reason_about_another_need_does_not_fit_and_a_paraphrased_recipient_does():
    assert "no_fit" in kinds("은은한 우디 향으로 집 안을 채우는 캔들", "저녁에 켜 두면 방이 포근해집니다.", CANDLE,
                             "신입 개발자 면접 준비", [WALLET])
    assert "no_fit" not in kinds("어머니 방을 은은한 우디 향으로 채우는 캔들", "저녁에 켜 두면 방이 포근해집니다.",
                                 CANDLE, "엄마 선물 5만 원 이하", [WALLET])  # 엄마 → 어머니: one facet


def test_an_item_for_men_in_their_thirties_is_not_for_parents_or_a_wife():
    for who in ("부모님께", "아내에게"):
        assert "contradicts" in kinds(f"{who} 드리는 가죽 카드지갑", "이니셜 각인으로 마음을 담을 수 있습니다.", WALLET,
                                      "부모님 결혼기념일 선물", [CUSHION])
    assert "contradicts" not in kinds("남편에게 드리는 가죽 카드지갑", "이니셜 각인으로 마음을 담을 수 있습니다.",
                                      WALLET, "남편 생일 선물", [CUSHION])


def test_the_same_reason_twice_on_one_screen_is_refused_and_what_sets_an_item_apart_is_named():
    assert same_reason("두 분께 좋은 선물", ["두 분께 좋은 선물!"]).kind == "same_as_other"
    assert same_reason("두 분께 좋은 선물", ["향기로운 저녁"]) is None
    assert apart_words(*CUSHION, [WALLET, CANDLE], "부모님 결혼기념일") == ["커플", "안마", "쿠션"]


def test_the_rule_reason_names_the_facets_what_the_item_is_and_its_price_against_the_budget():
    reason = rule_reason("회사 동료 집들이 선물 5만 원 이하", ItemIn("gift-002", *CANDLE), ("no_fit",))
    assert reason.short.startswith("동료 집들이 선물 · 은은한 우디 향") and reason.short.endswith("35,000원, 예산 안")
    assert "예산 50,000원 안에" in reason.long and reason.source == "rule"
    gift = ItemIn("g001", "[향수] 은은한 머스크 향의 오드퍼퓸 50ml, 데일리로 뿌리기 좋은 여성 향수",
                  "category: 향수, price: 89000, tags: 향/여성용/고급")
    assert "(여성용)" in rule_reason("아내 생일 선물", gift, ()).long  # an attribute that fits who it is for
    for query in ("따뜻한 거", "아무거나 추천", "비 오는 주말에 혼자 읽을 책"):
        assert "검색어와 가까운" not in rule_reason(query, gift, ()).short


def test_a_list_reason_describes_every_item_and_never_praises_what_was_left_out():
    titles = ["커플 안마 쿠션", "진공 이중 구조 스테인리스 텀블러"]
    profile = {"excluded_categories": ["도서"], "forbidden": []}
    assert len(off_items("부모님 결혼기념일 선물에 도서를 빼는 것은 마음을 편안하게 합니다", titles, profile)) == 3
    assert off_items("안마 쿠션과 보온 텀블러로 두 분의 휴식을 챙겨 드려요", titles, profile) == []


def test_the_rule_reason_makes_no_claim_of_fit_for_someone_the_item_is_not_for():
    men = ItemIn("g010", "[향수] 시트러스 계열의 상쾌한 남성 오드뚜왈렛 100ml",
                 "category: 향수, price: 72000, tags: 향/남성용")
    reason = rule_reason("여자친구 100일 선물", men, ("copy",))
    assert "여자친구" not in reason.short and reason.short.startswith("100일 선물")
