"""Small catalogs written for the tests, each used by more than one test module."""

import json
from pathlib import Path

# The "gw" collection of the gateway fixture ``http`` (tests/service/conftest.py): fields category (keyword)
# and price (integer).
GATEWAY_DOCS = [
    {"id": "g1", "text": "비 오는 날 읽기 좋은 장편소설", "payload": {"category": "소설", "price": 15000}},
    {"id": "g2", "text": "백엔드 개발자 기술 면접 질문 모음", "payload": {"category": "IT", "price": 22000}},
    {"id": "g3", "text": "제주도 올레길 여행 가이드북", "payload": {"category": "여행", "price": 17000}},
]

# The project's gift catalog (bench/data/gift_catalog.json) and its vocabulary, for conversation tests.
GIFT_CATALOG = json.loads((Path(__file__).parents[2] / "bench" / "data" / "gift_catalog.json")
                          .read_text(encoding="utf-8"))
GIFT_CATEGORIES = sorted({i["payload"]["category"] for i in GIFT_CATALOG["items"]})
GIFT_ATTRIBUTES = sorted({t for i in GIFT_CATALOG["items"] for t in i["payload"]["tags"]})
# A spec_delta proposal that changes nothing (a stand-in's answer adds only what a turn should).
EMPTY_PROPOSAL = {"recipient": "", "occasion": "", "stances": [], "keywords": [], "exclude_last": False}


def stances(**said: str) -> dict:
    """A spec_delta proposal's stances: ``stances(향수="refuse")`` → {"stances": [{"thing": "향수", ...}]}."""
    return {"stances": [{"thing": k, "stance": v} for k, v in said.items()]}
