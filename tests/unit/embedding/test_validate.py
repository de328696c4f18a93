import pytest

from services.bootstrap.errors import InvalidInput
from services.embedding.embedder import EmbedLimits, validate

LIMITS = EmbedLimits(max_texts=3, max_text_chars=10, max_tokens=512)


def fields(texts, kind="query"):
    with pytest.raises(InvalidInput) as info:
        validate(texts, kind, LIMITS)
    return [v.field for v in info.value.violations]


def test_accepts_good_request():
    validate(["책 추천"], "query", LIMITS)


def test_names_every_bad_field():
    assert fields([]) == ["texts"]
    assert fields(["a", "b", "c", "d"]) == ["texts"]
    assert fields(["좋은 책", "", "   \n"]) == ["texts[1]", "texts[2]"]
    assert fields(["가" * 11]) == ["texts[0]"]
    assert fields(["책"], kind=None) == ["kind"]
    assert fields([], kind="other") == ["kind", "texts"]
