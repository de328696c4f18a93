"""OCR pieces without a server: skew estimation, the fallback policy, job (de)serialisation."""

from __future__ import annotations

import pytest
from PIL import Image

from bench.ocr_set import build_set, cer
from services.ocr.engine import Recognition
from services.ocr.extractor import FallbackPolicy
from services.ocr.imaging import Limits, decode_image, estimate_skew, to_gray
from services.ocr.jobs import JobStore

SAMPLES = {s.name: s for s in build_set(per_category=1)}


@pytest.mark.parametrize("angle", [-7.0, -3.5, 4.0, 6.5])
def test_skew_estimate_recovers_the_rotation(angle):
    page = SAMPLES["paragraph-00"].image.rotate(angle, expand=True, fillcolor=(255, 255, 255))
    assert estimate_skew(to_gray(page, 1920)) == pytest.approx(-angle, abs=0.6)


def test_straight_text_and_blank_pages_are_not_turned():
    for name in ("paragraph-00", "receipt-00", "cover-00"):
        assert estimate_skew(to_gray(SAMPLES[name].image, 1920)) == 0.0
    assert estimate_skew(Image.new("L", (400, 300), 255)) == 0.0


def test_gray_bounds_the_long_side_and_flattens_alpha():
    img = Image.new("RGBA", (4000, 1000), (0, 0, 0, 0))
    gray = to_gray(img, 1920)
    assert gray.size == (1920, 480) and gray.mode == "L" and gray.getpixel((0, 0)) == 255


def test_fallback_policy():
    policy = FallbackPolicy(min_confidence=60, max_low_word_share=0.4)
    assert policy.failure(Recognition("", 0.0)) == "no_text"
    assert policy.failure(Recognition("글자", 40.0, [], [40.0])) == "low_confidence"
    assert policy.failure(Recognition("글자 셋", 70.0, [], [95, 30, 30])) == "low_word_confidence"
    assert policy.failure(Recognition("글자 셋", 90.0, [], [95, 90, 30])) == ""


def test_cer_ignores_whitespace():
    assert cer("가나 다", "가나다") == 0.0
    assert cer("가나다라", "가나다") == 0.25
    assert cer("", "") == 0.0


def test_decode_rejects_pixel_bombs_before_decoding():
    from services.bootstrap.errors import InvalidInput

    png = SAMPLES["paragraph-00"].png()
    with pytest.raises(InvalidInput) as info:
        decode_image(png, Limits(max_pixels=1000))
    assert "decompression bomb" in info.value.violations[0].description


def test_job_store_serialises_pages_losslessly():
    from services.ocr.engine import Line
    from services.ocr.extractor import PageResult
    from services.ocr.jobs import page_from_json, page_to_json

    page = PageResult(3, "안녕\n세계", [Line("안녕", 91.5, (1, 2, 3, 4))], 90.0, "tesseract", "", "", 1.5,
                      (10, 20), {"ocr_ns": 5})
    assert page_from_json(page_to_json(page)) == page
    assert JobStore._public({b"job_id": b"x", b"pages_total": b"2", b"options": b"{}"})["pages_total"] == 2


def test_vlm_reader_is_off_unless_configured():
    from services.ocr.vlm import GeminiVisionReader, OpenAIVisionReader, make_reader

    assert make_reader("openai", "", "m", "") is None
    assert make_reader("gemini", "", "gemini-2.5-flash", "") is None
    assert isinstance(make_reader("openai", "http://127.0.0.1:1/v1", "m", ""), OpenAIVisionReader)
    assert isinstance(make_reader("gemini", "", "gemini-2.5-flash", "k"), GeminiVisionReader)  # no call made


def test_gemini_vision_request_carries_the_image_and_the_prompt():
    import io

    from services.ocr.vlm import PROMPT, GeminiVisionReader

    image = Image.new("L", (40, 20), 255)
    contents, config = GeminiVisionReader.request(image, 7.5)
    blob, text = contents.parts
    assert blob.inline_data.mime_type == "image/png"
    assert Image.open(io.BytesIO(blob.inline_data.data)).size == (40, 20)
    assert text.text == PROMPT and config.temperature == 0 and config.http_options.timeout == 7500
