"""Judging a reading without ground truth: unread ink, the combined trigger, keeping the better reading."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bench.ocr_set import build_set, cer
from services.ocr.engine import Line, Recognition, TesseractPool
from services.ocr.enhance import Enhance, Prepared, as_is, prepare
from services.ocr.extractor import FallbackPolicy, prepare_page
from services.ocr.imaging import Preprocess
from services.ocr.plausibility import KoreanPlausibility, Plausibility
from services.ocr.quality import Reading, best, ink_of, judge, uncovered_ink


def test_uncovered_ink_is_the_share_outside_every_line_box():
    ink = np.zeros((100, 200), bool)
    ink[10:20, 10:110] = True  # 1000 pixels read
    ink[60:70, 10:60] = True  # 500 pixels no line covers
    assert uncovered_ink(ink, [Line("a", 90.0, (5, 8, 120, 15))]) == pytest.approx(500 / 1500)
    assert uncovered_ink(ink, []) == 1.0
    assert uncovered_ink(np.zeros((5, 5), bool), []) == 0.0


def test_confidence_is_discounted_by_implausible_text_and_unread_ink_is_a_failure():
    policy = FallbackPolicy(min_plausible_confidence=70.0, max_uncovered=0.15)
    rec = Recognition("글자 셋", 90.0, [], [90.0, 90.0])
    assert policy.failure(rec, Plausibility(0.15, 1.0, 3)) == ""  # 90 - 15 = 75
    assert policy.failure(rec, Plausibility(0.25, 1.0, 3)) == "implausible_text"  # 90 - 25 = 65
    assert policy.failure(rec, Plausibility(0.0, 1.0, 3), uncovered=0.3) == "unread_ink"
    assert policy.failure(Recognition("글자 셋", 75.0, [], [75.0]), Plausibility(0.1, 1.0, 3)) == "implausible_text"


def test_the_better_reading_wins_and_the_first_wins_a_tie():
    page = Prepared(Image.new("L", (10, 10), 255), (10, 10))

    def reading(confidence: float, implausible: float, uncovered: float) -> Reading:
        return Reading(page, Recognition("가", confidence), Plausibility(implausible, 1.0, 1), uncovered)

    first, worse, better = reading(90, 0.1, 0.0), reading(95, 0.0, 0.2), reading(88, 0.0, 0.0)
    assert best([first, worse]) is first  # 80 vs 75
    assert best([first, better]) is better  # 80 vs 88
    assert best([first, reading(80, 0.0, 0.0)]) is first


def test_only_pages_that_needed_no_inversion_are_also_read_as_uploaded():
    samples = {s.name: s for s in build_set(per_category=4, split="tune")}
    paragraph = samples["paragraph-01"].image
    prepared = prepare_page(paragraph, Preprocess(), Enhance())
    second = as_is(paragraph, prepared, Enhance())
    assert second is not None and second.image is paragraph and second.steps == ["as_is"]
    assert as_is(paragraph, prepared, Enhance(compare_as_uploaded=False)) is None
    inverted = Image.eval(paragraph.convert("L"), lambda v: 255 - v)
    assert as_is(inverted, prepare(inverted, Enhance()), Enhance()) is None
    cover = samples["cover-00"].image  # a display title: line scaling, and still compared (issue 67's tune split)
    prepared = prepare_page(cover, Preprocess(), Enhance())
    assert "lines" in prepared.steps and as_is(cover, prepared, Enhance()) is not None


def test_a_cover_whose_title_tesseract_dropped_is_flagged_and_the_prepared_reading_is_not():
    cover = {s.name: s for s in build_set(per_category=4, split="tune")}["cover-03"]
    pool, scorer, policy = TesseractPool("", "kor+eng", 1), KoreanPlausibility(), FallbackPolicy()
    try:
        prepared = prepare_page(cover.image, Preprocess(), Enhance())
        mine = judge(prepared, pool.recognize(prepared.image), scorer, ink_of(prepared.image))
        upload = Prepared(cover.image, cover.image.size, flat=prepared.flat)
        plain = judge(upload, pool.recognize(cover.image), scorer, ink_of(prepared.flat))
    finally:
        pool.close()
    assert cer(cover.truth, plain.rec.text) > 0.5 and plain.rec.mean_confidence > 85  # confident, yet wrong
    assert plain.uncovered > 0.15 and policy.judge(plain) == "unread_ink"
    assert cer(cover.truth, mine.rec.text) < 0.1 and policy.judge(mine) == ""
    assert best([mine, plain]) is mine


async def test_a_failed_second_reading_leaves_the_page_its_prepared_reading():
    from services.ocr.extractor import ExtractOptions, Extractor
    from services.ocr.imaging import Limits

    page = {s.name: s for s in build_set(per_category=4, split="tune")}["paragraph-01"]
    pool = TesseractPool("", "kor+eng", 2)
    recognize = pool.recognize

    def flaky(image, languages=None):
        if image is page.image:  # the upload itself: the second reading
            raise RuntimeError("engine failed")
        return recognize(image, languages)

    pool.recognize = flaky  # type: ignore[method-assign]
    extractor = Extractor(pool, None, FallbackPolicy(), Limits(), Preprocess(), max_pending=2, vlm_timeout_s=1.0)
    try:
        result = await extractor.read_page(0, page.image, ExtractOptions())
    finally:
        await extractor.close()
    assert result.engine == "tesseract" and cer(page.truth, result.text) < 0.2


def test_a_large_upload_is_read_as_uploaded_at_the_size_of_the_bounded_page():
    from services.ocr.imaging import Preprocess as Prep

    page = {s.name: s for s in build_set(per_category=4, split="tune")}["paragraph-01"].image
    big = page.resize((page.width * 3, page.height * 3))
    prepared = prepare_page(big, Prep(max_side=1200), Enhance())
    second = as_is(big, prepared, Enhance())
    assert prepared.flat is not None and max(prepared.flat.size) == 1200
    assert second is not None and second.image.size == prepared.flat.size


def test_the_early_upload_has_the_bounded_page_size():
    from services.ocr.enhance import as_uploaded, bounded_size
    from services.ocr.imaging import to_gray

    page = {s.name: s for s in build_set(per_category=4, split="tune")}["paragraph-01"].image
    big = page.resize((page.width * 3 + 1, page.height * 3))
    assert as_uploaded(big, bounded_size(big.size, 1200)).size == to_gray(big, 1200).size


def test_table_rules_are_found_and_erased_but_strokes_and_blocks_are_not():
    from PIL import ImageDraw

    from services.ocr.enhance import rules

    page = Image.new("L", (600, 400), 255)
    draw = ImageDraw.Draw(page)
    for y in (50, 150, 250):
        draw.line((40, y, 560, y), fill=150)  # grey rules, 1 px
    draw.line((200, 50, 200, 250), fill=0, width=2)
    draw.rectangle((40, 300, 560, 340), fill=0)  # a dark block: too thick to be a rule
    draw.line((300, 100, 340, 100), fill=0, width=3)  # a stroke: too short
    found, length = rules(page, 80)
    assert found[50, 100] and found[150, 500] and found[120, 200]
    assert not found[320, 300] and not found[100, 320]
    assert 3 * 520 <= length <= 3 * 520 + 2 * 210 + 40

    form = {s.name: s for s in build_set(per_category=2, split="tune")}["form-00"]
    prepared = prepare_page(form.image, Preprocess(), Enhance())
    assert "rules" in prepared.steps
    pool = TesseractPool("", "kor+eng", 1)
    try:
        assert cer(form.truth, pool.recognize(prepared.image).text) < 0.15
        assert cer(form.truth, pool.recognize(prepare_page(form.image, Preprocess(),
                                                           Enhance(rules=False)).image).text) > 0.15
    finally:
        pool.close()
    paragraph = {s.name: s for s in build_set(per_category=2, split="tune")}["paragraph-00"].image
    assert "rules" not in prepare_page(paragraph, Preprocess(), Enhance()).steps


async def test_a_clean_page_is_read_once_as_uploaded_and_others_both_ways_unless_engines_are_busy():
    from services.ocr.extractor import CleanPage, ExtractOptions, Extractor
    from services.ocr.imaging import Limits

    pages = {s.name: s for s in build_set(per_category=4, split="tune")}
    pool = TesseractPool("", "kor+eng", 2)
    recognize, read = pool.recognize, []

    def counted(image, languages=None):
        read.append(image)
        return recognize(image, languages)

    pool.recognize = counted  # type: ignore[method-assign]
    scorer = KoreanPlausibility()
    scorer.load()
    clean = CleanPage()
    try:
        for name, clean_page, setting in (("paragraph-01", True, clean), ("paragraph-01", False, None),
                                          ("low_contrast-00", False, clean)):
            page = pages[name]
            extractor = Extractor(pool, None, FallbackPolicy(), Limits(), Preprocess(), max_pending=2,
                                  vlm_timeout_s=1.0, accept_as_uploaded=101.0, plausibility=scorer, clean=setting)
            prepared = prepare_page(page.image, Preprocess(), Enhance())
            assert extractor.clean_page(prepared) is clean_page, name
            read.clear()
            result = await extractor.read_page(0, page.image, ExtractOptions())
            extractor._prepared.shutdown(wait=True)
            assert len(read) == (1 if clean_page else 2), name
            assert cer(page.truth, result.text) < 0.1
        # Another page being read (two engines): a page that is not clean is read once, prepared.
        page = pages["low_contrast-00"]
        extractor = Extractor(pool, None, FallbackPolicy(), Limits(), Preprocess(), max_pending=2,
                              vlm_timeout_s=1.0, accept_as_uploaded=88.0, plausibility=scorer, clean=clean)
        extractor._active = 1
        read.clear()
        result = await extractor.read_page(0, page.image, ExtractOptions())
        assert len(read) == 1 and read[0] is not page.image and cer(page.truth, result.text) < 0.1
        extractor.one_reading_when_busy = False
        read.clear()
        await extractor.read_page(0, page.image, ExtractOptions())
        extractor._prepared.shutdown(wait=True)
        assert len(read) == 2
    finally:
        pool.close()


@pytest.mark.parametrize(("name", "slow"), [("paragraph-01", "prepared"), ("low_contrast-01", "upload")])
async def test_the_first_reading_to_finish_is_kept_without_waiting_when_it_reads_well(name, slow):
    """Either reading, slowed by 3 s: the other, finishing first, is kept from bar 0; at bar 101 both are awaited."""
    import time

    from services.ocr.extractor import ExtractOptions, Extractor
    from services.ocr.imaging import Limits

    page = {s.name: s for s in build_set(per_category=4, split="tune")}[name]
    pool = TesseractPool("", "kor+eng", 2)
    recognize = pool.recognize

    def slowed(image, languages=None):
        if (image is page.image) == (slow == "upload"):  # the upload is read as it is; the prepared page is new
            time.sleep(3.0)
        return recognize(image, languages)

    pool.recognize = slowed  # type: ignore[method-assign]
    scorer = KoreanPlausibility()
    scorer.load()  # loaded once, before the clock starts
    took = {}
    for bar in (0.0, 101.0):
        extractor = Extractor(pool, None, FallbackPolicy(), Limits(), Preprocess(), max_pending=2,
                              vlm_timeout_s=1.0, accept_as_uploaded=bar, plausibility=scorer)
        t = time.perf_counter()
        result = await extractor.read_page(0, page.image, ExtractOptions())
        took[bar] = time.perf_counter() - t
        assert cer(page.truth, result.text) < 0.2
        extractor._second.shutdown(wait=True)  # the dropped reading ends before the next run
        extractor._prepared.shutdown(wait=True)
    assert took[0.0] < 2.5 <= took[101.0], took
    pool.close()
