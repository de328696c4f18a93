"""Boxes back onto the uploaded image, and findings onto characters (no Tesseract here)."""

from __future__ import annotations

import pytest
from PIL import Image

from bench.masking_set import _turn
from services.ocr.engine import Line, Word, split_box
from services.ocr.enhance import Prepared
from services.ocr.extractor import PageResult
from services.ocr.masking import locate, masked_png, page_text
from services.ocr.pii.detector import Policy
from services.ocr.results import page_from_json, page_to_json


@pytest.mark.parametrize("angle", [-4.0, 2.5, 7.0])
def test_a_box_on_the_turned_and_bounded_page_goes_back_to_the_upload(angle):
    upload = (3000, 2000)
    bounded = (1920, 1280)  # what Tesseract's page was cut down to before turning
    turned = Image.new("L", bounded).rotate(angle, expand=True).size
    original = (900, 600, 300, 60)  # in the upload
    in_bounded = tuple(round(v * 1920 / 3000) for v in original)
    on_page = _turn(in_bounded, angle, bounded, turned)  # where the service's reading has it
    prepared = Prepared(image=Image.new("L", turned), page_size=turned, skew=angle, source_size=bounded)
    back = prepared.to_upload(on_page, upload)
    # Turned and turned back, the upright box grows by the turn on both trips: the original lies inside.
    assert back[0] <= original[0] + 2 and back[1] <= original[1] + 2
    assert back[0] + back[2] >= original[0] + original[2] - 2 and back[1] + back[3] >= original[1] + original[3] - 2
    grow = 1 + 2 * abs(angle) / 57  # a slight turn adds little
    assert back[2] <= original[2] * grow + original[3] and back[3] <= original[3] + original[2] * 0.3


def _page(*lines: list[str]) -> PageResult:
    out, y = [], 10
    for words in lines:
        x, ws = 10, []
        for text in words:
            box = (x, y, 12 * len(text), 20)
            ws.append(Word(text, 95.0, box, split_box(box, len(text))))
            x += 12 * len(text) + 12
        out.append(Line(" ".join(words), 95.0, (10, y, x - 22, 20), words=ws, image_box=(10, y, x - 22, 20)))
        y += 40
    return PageResult(0, "\n".join(ln.text for ln in out), out, 95.0, "tesseract", image_size=(600, 200))


def test_page_text_keeps_a_box_for_every_character_read():
    page = _page(["성명:", "홍길동"], ["휴대폰", "010-1234-5678"])
    text, boxes = page_text(page)
    assert text == "성명: 홍길동\n휴대폰 010-1234-5678"
    assert len(boxes) == len(text) and boxes[3] is None and boxes[7] is None
    assert boxes[4] == (58, 10, 12, 20)  # 홍: the first third of its word


def test_findings_get_the_boxes_of_their_characters_and_keep_hides_only_the_rest():
    page = _page(["성명:", "홍길동"], ["연락처:010-1234-5678"])
    full = {f.kind: f for f in locate(page, Policy())}
    assert set(full) == {"person", "phone"}
    phone = full["phone"]
    assert phone.text == "010-1234-5678" and phone.box == (58, 50, 156, 20)  # not the label
    assert phone.masked == [phone.box]
    kept = {f.kind: f for f in locate(page, Policy(keep=True))}
    assert kept["phone"].masked == [(106, 50, 108, 20)]  # "010-" stays readable
    assert kept["person"].masked == [(70, 10, 24, 20)]  # the surname stays


def test_a_masked_page_is_black_where_the_findings_are():
    page = _page(["성명:", "홍길동"])
    found = locate(page, Policy())
    image = Image.new("RGB", (600, 200), (255, 255, 255))
    from io import BytesIO

    out = Image.open(BytesIO(masked_png(image, found))).convert("L")
    x, y, w, h = found[0].masked[0]
    assert out.getpixel((x + w // 2, y + h // 2)) == 0 and out.getpixel((20, 20)) == 255


def test_page_results_with_words_survive_json():
    page = _page(["성명:", "홍길동"])
    assert page_from_json(page_to_json(page)) == page


def test_stretched_character_boxes_are_cut_back_to_the_words_usual_size():
    from services.ocr.engine import tighten

    chars = [(0, 3, 13, 21), (18, 3, 13, 21), (36, 3, 13, 21), (54, 12, 7, 2), (66, 0, 14, 27), (84, 0, 40, 27)]
    assert tighten(chars, "123-45") == [*chars[:4], (66, 3, 14, 21), (84, 3, 13, 21)]
    latin = [(0, 0, 10, 30), (12, 8, 10, 22), (24, 8, 10, 22), (36, 8, 10, 22)]  # "kaaa": k keeps its ascender
    assert tighten(latin, "kaaa") == latin


def test_syllables_tesseract_split_are_glued_for_the_detector():
    page = _page(["여", "권", "번호:", "M12345678"])
    page.lines[0].words[1] = Word("권", 95.0, (26, 10, 12, 20), [(26, 10, 12, 20)])  # 4 px after 여
    text, _ = page_text(page, glue_gap=0.8)
    assert text.startswith("여권")
    assert page_text(page)[0].startswith("여 권")
