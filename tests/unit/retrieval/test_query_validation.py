import pytest

from services.bootstrap.errors import InvalidInput
from services.retrieval.query import Condition, Document, Filter, SearchQuery, validate_documents, validate_search

FIELDS = {"category": "keyword", "price": "integer", "rating": "float", "available": "bool"}


def violations(fn, *args):
    with pytest.raises(InvalidInput) as info:
        fn(*args)
    return [v.field for v in info.value.violations]


def test_documents_need_id_text_unique_ids_and_typed_fields():
    docs = [Document("a", "책"), Document("", "책"), Document("a", "  "), Document("b", "책", {"price": "비쌈"}),
            Document("c", "책", {"price": 1000.0, "available": True, "other": [1, 2]})]
    assert violations(validate_documents, docs, FIELDS) == [
        "documents[1].id", "documents[2].id", "documents[2].text", "documents[3].payload.price"]
    assert violations(validate_documents, [], FIELDS) == ["documents"]
    validate_documents([docs[-1]], FIELDS)  # integral float is an integer; undeclared keys are free


def test_a_keyword_field_may_hold_a_list_of_strings():
    validate_documents([Document("t", "향초", {"category": ["향", "수제"]})], FIELDS)
    bad = [Document("u", "향초", {"category": ["향", 3]}), Document("v", "향초", {"category": ["x"] * 101}),
           Document("w", "향초", {"price": [1000]})]
    assert violations(validate_documents, bad, FIELDS) == [
        "documents[0].payload.category", "documents[1].payload.category", "documents[2].payload.price"]


def test_search_rejects_bad_query_top_k_vector_and_filters():
    q = SearchQuery(text="  ", top_k=0, vector=[0.1] * 10, filter=Filter(must=(
        Condition("color", equals="red"), Condition("price", equals="싸다"), Condition("category", gte=1),
        Condition("category", any_of=()),
    )))
    assert violations(validate_search, q, FIELDS, 384) == [
        "query", "top_k", "query_vector", "query_vector_revision", "filter.must[0].field", "filter.must[1]",
        "filter.must[2]", "filter.must[3]"]


def test_good_search_passes():
    validate_search(SearchQuery(text="소설", top_k=5, filter=Filter(
        must=(Condition("price", lte=20000), Condition("category", any_of=("소설", "시"))),
        must_not=(Condition("available", equals=False),))), FIELDS, 384)
