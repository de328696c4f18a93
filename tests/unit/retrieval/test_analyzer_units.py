"""The units profile: bound nouns that carry meaning are indexed, and the label follows the definition."""

import pytest

from services.retrieval.korean import analyzer as analyzer_module
from services.retrieval.korean.analyzer import DEFAULT_PROFILE, TERM_PROFILES, KoreanAnalyzer


@pytest.fixture(scope="module")
def units():
    return KoreanAnalyzer("nouns+predicates+units")


@pytest.fixture(scope="module")
def legacy():
    return KoreanAnalyzer("nouns+predicates")


def test_units_and_counters_are_index_terms(units, legacy):
    assert units.terms("리터는 몇 갤런인가요?") == ["리터", "갤런"]
    assert legacy.terms("리터는 몇 갤런인가요?") == []  # what the issue found
    assert {"킬로그램", "1.5킬로그램", "노트북"} <= set(units.terms("무게가 1.5킬로그램인 노트북"))


def test_numbers_are_joined_to_their_counter(units):
    terms = units.terms("책 3권과 사과 5개를 샀다")
    assert {"책", "3", "권", "3권", "사과", "5", "개", "5개"} <= set(terms)
    assert "2리터" in units.terms("2리터 생수")


def test_grammatical_bound_nouns_stay_out(units):
    assert units.terms("할 수 있는 것은 없다") == ["하", "있", "없"]


def test_units_profile_is_the_default_and_its_label_says_which_definition(units, legacy):
    assert DEFAULT_PROFILE == "nouns+predicates+units"
    label = units.info.label()
    assert label.startswith("kiwipiepy-") and "/nouns+predicates+units#" in label
    assert label != legacy.info.label()


def test_changing_the_units_definition_changes_the_label(units, monkeypatch):
    before = units.info.label()
    monkeypatch.setattr(analyzer_module, "UNIT_STOP_NNB", analyzer_module.UNIT_STOP_NNB | {"개"})
    assert units.info.label() != before  # a collection indexed before the change is refused until reindexed


def test_legacy_profiles_are_frozen(legacy):
    # Their labels carry no fingerprint, so their definitions must never change (old collections rely on it).
    assert TERM_PROFILES["nouns"] == ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_")
    assert TERM_PROFILES["nouns+predicates"] == ("NNG", "NNP", "NR", "SL", "SN", "SH", "XR", "W_", "VV", "VA")
    assert TERM_PROFILES["content"] == ("NNG", "NNP", "NNB", "NR", "NP", "SL", "SN", "SH", "XR", "W_", "VV", "VA",
                                        "MAG")
    assert legacy.info.label().endswith("/nouns+predicates")


@pytest.fixture(scope="module")
def compounds():
    return KoreanAnalyzer("nouns+predicates+units+compounds")


def test_nouns_written_together_also_give_the_compound(compounds, units):
    assert compounds.terms("건강보험 가입 조건") == ["건강", "보험", "건강보험", "가입", "조건"]
    assert units.terms("건강보험 가입 조건") == ["건강", "보험", "가입", "조건"]
    assert compounds.terms("건강 보험 가입") == ["건강", "보험", "가입"]  # spaced nouns are not joined
    assert compounds.terms("책 3권을 샀다") == units.terms("책 3권을 샀다")  # units as in the units profile


def test_the_compounds_profile_has_its_own_label(compounds, units):
    assert "/nouns+predicates+units+compounds#" in compounds.info.label()
    assert compounds.info.label() != units.info.label()
