"""Photos found by their pixels, and masked boxes fitted to the ink, on images drawn here."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bench.ocr_set import FONT_DIR
from services.ocr.masking import Located, fit, fitted
from services.ocr.pictures import find

FONT = ImageFont.truetype(str(FONT_DIR / "NanumGothic.ttf"), 28)


def page_with(text: str, at: tuple[int, int] = (70, 200), size: tuple[int, int] = (1240, 900)) -> Image.Image:
    img = Image.new("RGB", size, (255, 255, 255))
    ImageDraw.Draw(img).text(at, text, font=FONT, fill=(20, 20, 20))
    return img


def ink_box(text: str, at: tuple[int, int]) -> tuple[int, int, int, int]:
    """The dark pixels' box of ``text`` drawn alone at ``at`` (tighter than the font's text box)."""
    img = Image.new("L", (1240, 900), 255)
    ImageDraw.Draw(img).text(at, text, font=FONT, fill=0)
    ys, xs = np.nonzero(np.asarray(img) < 128)
    return int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


def smooth_photo(seed: int, size: tuple[int, int] = (180, 240)) -> Image.Image:
    rng = np.random.default_rng(seed)
    grey = rng.normal(0, 1, (16, 12, 1))
    field = (grey - grey.min()) / (grey.max() - grey.min()) * 235 + 10 + rng.normal(0, 8, (16, 12, 3))
    return Image.fromarray(field.clip(0, 255).astype("uint8")).resize(size, Image.Resampling.BICUBIC)


def test_a_box_taller_and_wider_than_the_ink_is_trimmed_to_it():
    img = page_with("연락처 010-2468-1357 입니다", (70, 200))
    number = ink_box("010-2468-1357", (70 + FONT.getlength("연락처 "), 200))
    x, y, w, h = number
    loose = (x - 6, y - 9, w + 12, h + 18)
    got = fit(np.asarray(img.convert("L")), loose)
    assert all(abs(a - b) <= 2 for a, b in zip(got, number, strict=True)), (got, number)


def test_a_box_that_cuts_its_last_character_grows_to_it_but_not_into_the_next_word():
    img = page_with("연락처 010-2468-1357 입니다", (70, 200))
    number = ink_box("010-2468-1357", (70 + FONT.getlength("연락처 "), 200))
    x, y, w, h = number
    short = (x + 3, y, w - 8, h)  # OCR's box cut into the first and the last digit
    got = fit(np.asarray(img.convert("L")), short)
    assert abs(got[0] - x) <= 2 and abs(got[0] + got[2] - (x + w)) <= 2, (got, number)


def test_a_box_over_blank_paper_is_left_as_it_is():
    img = page_with("")
    assert fit(np.asarray(img.convert("L")), (100, 100, 80, 30)) == (100, 100, 80, 30)


def test_fitted_findings_keep_kind_and_text_and_union_their_lines():
    img = page_with("홍길동", (70, 200))
    x, y, w, h = ink_box("홍길동", (70, 200))
    out = fitted(img, [Located("person", 0.9, "name", "홍길동", (x - 5, y - 5, w + 10, h + 10),
                               [(x - 5, y - 5, w + 10, h + 10)])])
    assert out[0].kind == "person" and out[0].text == "홍길동" and out[0].box == out[0].masked[0]
    assert abs(out[0].box[2] - w) <= 2 and abs(out[0].box[3] - h) <= 2


def test_a_photograph_is_found_and_text_a_chart_and_a_noisy_scan_are_not():
    page = page_with("이 력 서   홍길동   백엔드 개발자 지원", (70, 120), (1240, 1600))
    page.paste(smooth_photo(1), (980, 40))
    chart = ImageDraw.Draw(page)
    for k, height in enumerate((120, 80, 100)):
        chart.rectangle((100 + 50 * k, 600 - height, 130 + 50 * k, 600), fill=(31, 119, 180))
    found = find(page)
    assert [p.kind for p in found] == ["photo"], found
    x, y, w, h = found[0].box
    assert x <= 985 and y <= 45 and x + w >= 1155 and y + h >= 275, found[0].box
    rng = np.random.default_rng(5)
    noisy = np.clip(np.asarray(page_with("잡음이 많은 스캔 페이지").convert("L"), np.float32) * 0.9 + 12
                    + rng.normal(0, 12, (900, 1240)), 0, 255).astype(np.uint8)
    assert find(Image.fromarray(noisy)) == []
