"""services/ocr/files.py: a file's type from its bytes, each format's text, and every bound a clear 400."""

from __future__ import annotations

import io
import zipfile

import pytest
from PIL import Image

from bench.file_set import build_files, docx_file, html_file, reportlab_pdf
from bench.ocr_set import cer
from services.bootstrap.errors import InvalidInput
from services.ocr.filereader import layer_lines
from services.ocr.files import layer_problem, read_docx, read_html, read_pdf, read_text, sniff
from services.ocr.imaging import Limits

LIMITS = Limits(max_bytes=3_000_000, pdf_dpi=200)
FILES = {f.name: f for f in build_files(11, per_source=1)}


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (40, 20), "white").save(buf, format="PNG")
    return buf.getvalue()


def test_the_type_comes_from_the_bytes_not_the_name():
    assert [sniff(FILES[n].data) for n in ("reportlab-0", "fpdf2-0", "scan-0", "docx-0", "html-0")] == \
        ["pdf", "pdf", "pdf", "docx", "html"]
    assert sniff(png()) == "image"
    assert sniff("이력서\n홍길동".encode()) == "text" and sniff("이력서".encode("cp949")) == "text"
    for bad in (b"", b"\x00\x01\x02\x03binary\x00"):
        with pytest.raises(InvalidInput):
            sniff(bad)


def test_digital_pdfs_are_read_from_their_layer_with_boxes_and_scans_are_left_to_ocr():
    for name in ("reportlab-0", "fpdf2-0"):
        sample = FILES[name]
        reading = read_pdf(sample.data, LIMITS, 100)
        assert len(reading.pages) == len(sample.pages)
        for page, truth in zip(reading.pages, sample.pages, strict=True):
            assert page.problem == "" and cer(truth, page.text) == 0.0, (name, page.text[:80])
            assert page.size == (1654, 2339)  # A4 at 200 dpi
            boxed = [c for c in page.chars if c.box is not None]
            assert boxed and all(0 <= c.box[0] < c.box[2] <= page.size[0] and 0 <= c.box[1] < c.box[3]
                                 for c in boxed)
    lines = layer_lines(read_pdf(FILES["reportlab-0"].data, LIMITS, 100).pages[0].chars)
    assert lines[1].text.startswith("연락처: 010-") and lines[1].words[1].box[2] > 0
    assert len(lines[1].words[1].chars) == len(lines[1].words[1].text)  # one box per character
    scan = read_pdf(FILES["scan-0"].data, LIMITS, 100)
    assert [p.problem for p in scan.pages] == ["no_text_layer"] * len(scan.pages)


def test_a_layer_of_unmapped_glyphs_is_not_used():
    assert layer_problem("\ufffd" * 30 + "가나다", False, None) == "unmapped_glyphs"
    assert layer_problem("\ue001\ue002\ue003" * 10, False, None) == "unmapped_glyphs"
    assert layer_problem("정상적인 한국어 문장입니다 여기에", False, 0.5) == "implausible_text"
    assert layer_problem("12", True, None) == "no_text_layer" and layer_problem("12", False, None) == ""
    assert layer_problem("정상적인 한국어 문장입니다 여기에", True, 0.02) == ""


def test_word_html_and_text_files_keep_their_text_in_order():
    assert cer(FILES["docx-0"].text, read_docx(FILES["docx-0"].data, LIMITS).pages[0].text) == 0.0
    assert cer(FILES["html-0"].text, read_html(FILES["html-0"].data, LIMITS).pages[0].text) == 0.0
    html = read_html(html_file(["제목", "머리말", "하나", "둘", "셋", "본문"]), LIMITS).pages[0].text
    assert "var page" not in html and "font-family" not in html and html.splitlines()[:2] == ["제목", "머리말"]
    legacy = '<html><head><meta charset="euc-kr"></head><body><p>연봉 협상</p></body></html>'.encode("cp949")
    assert read_html(legacy, LIMITS).pages[0].text == "연봉 협상"
    assert read_text("첫 줄\r\n둘째 줄".encode("utf-16"), LIMITS).pages[0].text == "첫 줄\n둘째 줄"
    assert read_text("이력서".encode("cp949"), LIMITS).pages[0].text == "이력서"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize(("data", "why"), [
    (_zip({"word/document.xml": b"<a/>", "bomb.bin": b"\x00" * 40_000_000}), "decompression bomb"),
    (_zip({"hello.txt": "안녕".encode()}), "not a Word document"),
    (docx_file(["a", "b", "c", "d", "e"])[:300], "cannot be opened"),
    (_zip({"word/document.xml": b"<not really xml"}), "unreadable Word document"),
])
def test_a_bad_word_file_is_named(data, why):
    with pytest.raises(InvalidInput) as err:
        read_docx(data, LIMITS)
    assert why in str(err.value)


def test_a_bad_pdf_is_named():
    pdf = reportlab_pdf([["한 쪽"]] * 3, "NanumGothic.ttf")
    with pytest.raises(InvalidInput, match="3 pages, over the limit of 2"):
        read_pdf(pdf, LIMITS, 2)
    with pytest.raises(InvalidInput, match="unreadable PDF"):
        read_pdf(pdf[: len(pdf) // 3], LIMITS, 100)
    with pytest.raises(InvalidInput, match="over the limit"):
        read_pdf(pdf + b"\n%" + b"x" * 3_000_000, LIMITS, 100)


def test_an_encrypted_pdf_is_named():
    from reportlab.lib import pdfencrypt
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, encrypt=pdfencrypt.StandardEncryption("user-secret", canPrint=0))
    c.drawString(72, 720, "secret")
    c.showPage()
    c.save()
    with pytest.raises(InvalidInput, match="encrypted"):
        read_pdf(buf.getvalue(), LIMITS, 100)
