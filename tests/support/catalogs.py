"""Small catalogs written for the tests, each used by more than one test module."""

# The "gw" collection of the gateway fixture ``http`` (tests/service/conftest.py): fields category (keyword)
# and price (integer).
GATEWAY_DOCS = [
    {"id": "g1", "text": "비 오는 날 읽기 좋은 장편소설", "payload": {"category": "소설", "price": 15000}},
    {"id": "g2", "text": "백엔드 개발자 기술 면접 질문 모음", "payload": {"category": "IT", "price": 22000}},
    {"id": "g3", "text": "제주도 올레길 여행 가이드북", "payload": {"category": "여행", "price": 17000}},
]
