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


def test_decode_names_the_pixel_limit_and_empty_images():
    import struct
    import zlib

    from services.bootstrap.errors import InvalidInput

    def png(width: int, height: int) -> bytes:
        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(
            b"IEND", b"")

    with pytest.raises(InvalidInput) as info:  # over Pillow's own limit: Pillow refuses it before we look
        decode_image(png(20000, 20000), Limits(max_pixels=1_000_000))
    assert "20000x20000 = 400000000 pixels is over the limit of 1000000" in info.value.violations[0].description
    with pytest.raises(InvalidInput) as info:
        decode_image(png(0, 0), Limits())
    assert info.value.violations[0].description == "image has no pixels (0x0)"


def test_flatten_turns_light_text_on_gradients_into_dark_ink():
    import numpy as np

    from services.ocr.enhance import flatten

    cover = SAMPLES["cover-00"].image  # style 0 of the set: dark title on a light gradient
    dark_bg = Image.eval(SAMPLES["paragraph-00"].image.convert("L"), lambda v: 255 - v)  # light text on black
    flat = flatten(dark_bg)
    assert flat.inverted and not flatten(cover.convert("L")).inverted
    a = np.asarray(flat.image)
    assert np.median(a) > 240 and a.min() < 60  # white page, dark ink


def test_line_normalisation_maps_boxes_back_to_the_page():
    from services.ocr.enhance import Enhance, prepare

    page = Image.new("L", (800, 600), 255)
    from PIL import ImageDraw

    from bench.ocr_set import _font
    draw = ImageDraw.Draw(page)
    draw.text((100, 100), "큰 제목", font=_font("NanumGothicBold.ttf", 110), fill=0)
    draw.text((300, 450), "작은 글씨", font=_font("NanumGothic.ttf", 24), fill=0)
    prepared = prepare(page, Enhance())
    assert "lines" in prepared.steps and len(prepared.strips) == 2 and prepared.page_size == (800, 600)
    small = prepared.strips[1]
    left, top, width, height = prepared.to_page((small.dst[0], small.dst[1], 100, 30))
    assert abs(left - small.src[0]) <= 1 and abs(top - small.src[1]) <= 1 and height < 30


def test_plausibility_flags_garbled_korean_not_clean_text():
    from services.ocr.plausibility import KoreanPlausibility

    scorer = KoreanPlausibility()
    clean = scorer.score("이 청소기는 무선이라 가볍고 조용하며\n도서관은 오전 아홉 시에 문을 열고")
    garbled = scorer.score("이 청소기는 무선이라 HAD 조용하며\n결흔기념일 선믈로는 ㅁ 악회 |",
                           [("이", 90), ("청소기는", 90), ("HAD", 40), ("조용하며", 90), ("결흔기념일", 80),
                            ("선믈로는", 80), ("ㅁ", 30), ("악회", 50), ("|", 20)])
    assert clean.implausible_share == 0.0
    assert garbled.implausible_share > 0.2 and {"latin", "jamo", "junk", "unlikely"} <= set(garbled.reasons)
    policy = FallbackPolicy()
    assert policy.failure(Recognition("글자", 90.0, [], [90.0]), garbled) == "implausible_text"
    assert policy.failure(Recognition("글자", 90.0, [], [90.0]), clean) == ""
