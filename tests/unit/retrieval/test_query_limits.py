"""Limits on what one request may make the retrieval service do."""

import pytest

from services.bootstrap.errors import InvalidInput
from services.retrieval.query import MAX_FIELDS, check_fields


def test_too_many_fields_are_refused_naming_the_field():
    check_fields({f"f{i}": "keyword" for i in range(MAX_FIELDS)})
    with pytest.raises(InvalidInput) as info:
        check_fields({f"f{i}": "keyword" for i in range(MAX_FIELDS + 1)})
    assert [v.field for v in info.value.violations] == ["fields"]
