import pytest

from services.retrieval.korean.analyzer import KoreanAnalyzer


@pytest.fixture(scope="module")
def analyzer():
    return KoreanAnalyzer("nouns+predicates")


def test_particles_and_endings_are_dropped(analyzer):
    assert analyzer.terms("학교에 갔다") == ["학교", "가"]
    assert analyzer.terms("책을 읽었습니다") == ["책", "읽"]
    assert "에" not in analyzer.terms("서울에서 부산까지")


def test_spacing_errors_give_the_same_terms(analyzer):
    assert analyzer.terms("학교에가서책을읽었다") == analyzer.terms("학교에 가서 책을 읽었다")


def test_mixed_korean_english_numbers_are_kept_and_latin_lowercased(analyzer):
    terms = analyzer.terms("아이폰15 Pro 케이스 3개")
    assert {"아이폰", "15", "pro", "케이스", "3"} <= set(terms)


def test_full_width_forms_are_normalised(analyzer):
    assert analyzer.terms("ＡＢＣ 노트북") == analyzer.terms("abc 노트북")


def test_predicates_indexed_by_stem_across_endings(analyzer):
    assert analyzer.terms("맛있게 먹었다")[-1] == analyzer.terms("먹는 중")[0] == "먹"


def test_profiles_differ_and_are_named():
    nouns = KoreanAnalyzer("nouns")
    assert nouns.terms("책을 읽었다") == ["책"]
    assert nouns.info.label().startswith("kiwipiepy-") and nouns.info.label().endswith("/nouns")
    with pytest.raises(ValueError):
        KoreanAnalyzer("everything")


def test_mecab_backend_splits_fused_inflections_into_stems():
    mecab = KoreanAnalyzer("nouns+predicates", backend="mecab")
    assert mecab.terms("책을 샀어요") == ["책", "사"]
    assert mecab.terms("학교에가서") == ["학교", "가"]
    assert mecab.info.label().startswith("python-mecab-ko-")


def test_a_long_text_is_analysed_in_pieces_cut_at_sentence_ends():
    from services.retrieval.korean.analyzer import PIECE_CHARS, KoreanAnalyzer, pieces

    sentence = "연차 휴가는 다음 해로 다섯 일까지 이월할 수 있습니다. "
    text = sentence * (3 * PIECE_CHARS // len(sentence))
    parts = pieces(text)
    assert "".join(parts) == text and len(parts) >= 3 and all(len(p) <= PIECE_CHARS for p in parts)
    assert all(p.endswith(". ") for p in parts[:-1])  # cut after a sentence end, never inside a word
    analyzer = KoreanAnalyzer()
    assert analyzer.terms(text) == [t for p in parts for t in analyzer.terms(p)]
    assert analyzer.terms(text).count("연차") == text.count("연차")  # nothing lost at the cuts
    assert pieces("짧은 글") == ["짧은 글"] and pieces("가" * (PIECE_CHARS + 5)) == ["가" * PIECE_CHARS, "가" * 5]
