"""The second read after a label: a real Tesseract pool on lines drawn here, the first read's findings given."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PIL import Image, ImageDraw, ImageFont

from bench.ocr_set import FONT_DIR
from services.ocr.engine import TesseractPool
from services.ocr.masking import Located
from services.ocr.pii.detector import Policy
from services.ocr.rereads import candidates, reread

FONT = ImageFont.truetype(str(FONT_DIR / "NanumGothic.ttf"), 26)


@pytest.fixture(scope="module")
def pool():
    p = TesseractPool("", "kor+eng", 1)
    yield p
    p.close()


def page(lines: list[str]) -> Image.Image:
    img = Image.new("L", (1240, 80 + 60 * len(lines)), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((70, 40 + 60 * i), line, font=FONT, fill=20)
    return img


def read(pool: TesseractPool, img: Image.Image):
    return SimpleNamespace(lines=pool.recognize(img).lines)


def test_a_label_with_no_value_found_after_it_is_read_again_and_its_value_masked(pool):
    img = page(["이메일: gildong.hong@mail-box.co.kr", "연락처: 010-4821-7730"])
    first = read(pool, img)
    # As if the first read had found the phone but misread the e-mail (found nothing of that kind).
    phone_line = first.lines[1]
    phone = Located("phone", 0.9, "phone", "010-4821-7730", phone_line.words[-1].box, [phone_line.words[-1].box])
    todo = candidates(first, [phone], Policy().kinds)
    assert [kind for kind, _, _ in todo] == ["email"]
    found = reread(first, img, [phone], pool, Policy())
    assert [(f.kind, f.text, f.rule.endswith(":reread")) for f in found] == [
        ("email", "gildong.hong@mail-box.co.kr", True)]
    x, y, w, h = found[0].box
    email_word = first.lines[0].words[-1].box
    assert abs(x - email_word[0]) < 25 and abs(x + w - email_word[0] - email_word[2]) < 25 and h < 60


def test_a_value_already_found_after_its_label_is_not_read_again(pool):
    img = page(["연락처: 010-4821-7730"])
    first = read(pool, img)
    word = first.lines[0].words[-1].box
    assert candidates(first, [Located("phone", 0.9, "phone", "010-4821-7730", word, [word])], Policy().kinds) == []
    assert candidates(first, [], ("email",)) == []  # a kind not asked for is not looked for
