"""Fuzzing every file reader, bounded (issue 75): structure-aware inputs, an answer or a named 400 in bounded time.

Hypothesis builds files the way each format is built — HTML trees with comments, declarations and text
in several encodings; PDFs from objects, pages and content streams (shared, compressed, truncated);
Word documents from paragraphs, runs and tables in a zip (sometimes broken); plain text in every
encoding the service reads and some it does not; images of every format and mode, whole or cut — and
mutates the bytes. The property for every reader: it returns a reading or raises ``InvalidInput`` (a
400 naming the problem), never another exception, within a time budget for the input's size. Each
format runs a fixed number of examples (CI's budget); ``FUZZ_EXAMPLES`` raises it for a long local run.

Inputs that once failed a reader are replayed first, as ``@example`` rows: the 281-byte comment page
that stalled the OCR service for hours is the first of them.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from bench.hostile_set import _docx, _pdf
from services.bootstrap.errors import InvalidInput
from services.ocr.files import read_docx, read_html, read_pdf, read_text, sniff
from services.ocr.imaging import Limits, decode_image, load_pages

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
LIMITS = Limits(max_bytes=2_000_000, max_pixels=4_000_000, max_pages=20, max_page_chars=50_000,
                max_file_chars=200_000, max_xml_bytes=2_000_000, max_nodes=50_000)
BUDGET_S = 3.0  # per example: every input here is under 2 MB; the service's budget per file is 8 s
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
READERS = {"pdf": lambda d: read_pdf(d, LIMITS, 100), "docx": lambda d: read_docx(d, LIMITS),
           "html": lambda d: read_html(d, LIMITS), "text": lambda d: read_text(d, LIMITS),
           "image": lambda d: decode_image(d, LIMITS)}


def read_any(data: bytes) -> str:
    """What the service does with an upload: its type from the bytes, then that type's reader; the type."""
    kind = sniff(data)
    READERS[kind](data)
    return kind


CORPUS = Path(__file__).parent / "fuzz_corpus"  # every input that once failed a reader, replayed below


def bounded(data: bytes) -> None:
    """The property: a reading or a named 400, within the budget (a failing input is kept with FUZZ_SAVE=1)."""
    t = time.perf_counter()
    try:
        try:
            read_any(data)
        except InvalidInput as err:
            assert err.violations and err.message, err
        took = time.perf_counter() - t
        assert took < BUDGET_S, f"{took:.2f} s for {len(data)} bytes"
    except BaseException:
        if os.environ.get("FUZZ_SAVE"):
            CORPUS.mkdir(exist_ok=True)
            (CORPUS / f"{hashlib.sha256(data).hexdigest()[:16]}.bin").write_bytes(data)
        raise


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.bin")) if CORPUS.exists() else [], ids=lambda p: p.name)
def test_every_input_that_once_failed_is_read_or_refused_in_bounds(path):
    bounded(path.read_bytes())


# -- mutations ------------------------------------------------------------------------------------------

@st.composite
def mutated(draw, inner):
    """``inner``'s bytes, sometimes truncated, bit-flipped, or with a run repeated."""
    data = draw(inner)
    how = draw(st.sampled_from(["as is", "as is", "truncate", "flip", "repeat"]))
    if how == "truncate" and data:
        return data[:draw(st.integers(0, len(data)))]
    if how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
    if how == "repeat" and data:
        a = draw(st.integers(0, len(data) - 1))
        b = draw(st.integers(a, min(len(data), a + 64)))
        return data[:a] + data[a:b] * draw(st.integers(2, 500)) + data[b:]
    return data


TEXT = st.text(alphabet=st.sampled_from("가나다라마바사아자차카타파하힣 \n\tabcxyz012<>&;\"'=/-!?:"), max_size=200)

# -- HTML -----------------------------------------------------------------------------------------------

TAGS = ["html", "head", "body", "div", "p", "br", "table", "tr", "td", "script", "style", "span", "li", "meta",
        "title", "template", "noscript", "pre"]


@st.composite
def html_tree(draw, depth=0):
    if depth > 6 or draw(st.booleans()):
        return draw(TEXT)
    tag = draw(st.sampled_from(TAGS))
    attrs = draw(st.sampled_from(["", ' class="a"', ' charset="utf-8"', " charset=euc-kr", ' a="<!--"']))
    children = draw(st.lists(html_tree(depth + 1), max_size=4))
    closed = draw(st.booleans())
    return f"<{tag}{attrs}>" + "".join(children) + (f"</{tag}>" if closed else "")


@st.composite
def html_files(draw):
    head = draw(st.sampled_from(["", "<!DOCTYPE html>", '<?xml version="1.0"?>', "<!--x-->", "<!---->" * 30,
                                 "<!-- <html> -->", "  \n"]))
    body = head + "".join(draw(st.lists(html_tree(), min_size=1, max_size=4)))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "cp949", "utf-16"]))
    return body.encode(encoding, errors="replace")


@FUZZ
@given(mutated(html_files()))
@example(b"<!---->" * 40 + b"x")  # 281 bytes: stalled the OCR service for hours (HTML_START backtracking)
@example(b"<!---->" * 290 + b"<html><body>x</body></html>")
@example(b"<meta " + b"charset=" * 500)
def test_html_is_read_or_refused_in_bounds(data):
    bounded(data)


# -- PDF ------------------------------------------------------------------------------------------------

@st.composite
def content_streams(draw):
    ops = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text", "text", "move", "font", "junk", "image"]))
        if kind == "text":
            s = draw(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="()\\"),
                             max_size=80))
            ops.append(f"({s}) Tj".encode() * draw(st.integers(1, 50)))
        elif kind == "move":
            ops.append(b"%d %d Td" % (draw(st.integers(-1000, 1000)), draw(st.integers(-1000, 1000))))
        elif kind == "font":
            ops.append(b"/F1 %d Tf" % draw(st.integers(0, 300)))
        elif kind == "image":
            ops.append(b"q 100 0 0 100 0 0 cm /Im1 Do Q")
        else:
            ops.append(draw(st.binary(max_size=40)))
    return b"BT " + b"\n".join(ops) + b" ET"


@st.composite
def pdf_files(draw):
    pages = draw(st.integers(1, 8))
    shared = draw(st.booleans())
    streams = [draw(content_streams()) for _ in range(1 if shared else pages)]
    compress = draw(st.booleans())
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (5 + len(streams) + k) for k in range(pages))
               + b"] /Count %d >>" % pages,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 "
               b"/Length 4 >>\nstream\n\x00\xff\xff\x00\nendstream"]
    for s in streams:
        body = zlib.compress(s) if compress else s
        objects.append(b"<< /Length %d%s >>\nstream\n" % (len(body), b" /Filter /FlateDecode" if compress else b"")
                       + body + b"\nendstream")
    for k in range(pages):
        contents = 5 if shared else 5 + k
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 3 0 R >> "
                       b"/XObject << /Im1 4 0 R >> >> /Contents %d 0 R >>"
                       % (draw(st.integers(1, 2000)), draw(st.integers(1, 2000)), contents))
    return _pdf(objects)


@FUZZ
@given(mutated(pdf_files()))
@example(_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>"]))  # a loop
def test_pdf_is_read_or_refused_in_bounds(data):
    bounded(data)
    if data.startswith(b"%PDF"):  # the OCR path renders what the layer path reads
        try:
            load_pages(data, LIMITS, max_pages=2)
        except InvalidInput:
            pass


# -- DOCX -----------------------------------------------------------------------------------------------

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


@st.composite
def docx_files(draw):
    blocks = []
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 4)) == 0:
            cells = "".join(f"<w:tc><w:p><w:r><w:t>{draw(TEXT).replace('<', '')}</w:t></w:r></w:p></w:tc>"
                            for _ in range(draw(st.integers(0, 4))))
            blocks.append(f"<w:tbl><w:tr>{cells}</w:tr></w:tbl>")
        else:
            words = draw(TEXT).replace("<", "").replace("&", "")
            runs = "".join(draw(st.sampled_from([f"<w:r><w:t>{words}</w:t></w:r>", "<w:r><w:tab/></w:r>",
                                                 "<w:r><w:br/></w:r>", "<w:r/>"]))
                           for _ in range(draw(st.integers(0, 5))))
            blocks.append(f"<w:p>{runs}</w:p>")
    document = f"<w:document {W}><w:body>{''.join(blocks)}</w:body></w:document>".encode()
    if draw(st.integers(0, 5)) == 0:
        document = document.replace(b"<w:body>", b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]><w:body>&a;", 1)
    data = _docx(document)
    if draw(st.integers(0, 6)) == 0:  # another member, or a zip that is no Word file
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr(draw(st.sampled_from(["word/document.xml", "other.xml"])), draw(st.binary(max_size=200)))
        data = out.getvalue()
    return data


@FUZZ
@given(mutated(docx_files()))
def test_docx_is_read_or_refused_in_bounds(data):
    bounded(data)


# -- text -----------------------------------------------------------------------------------------------

@FUZZ
@given(st.one_of(st.tuples(st.text(max_size=2000), st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "cp949",
                                                                    "euc-kr", "latin-1", "utf-32"])),
                 st.tuples(st.binary(max_size=2000), st.just("raw"))))
@example(("", "raw"))
@example((b"\xff\xfe<", "raw"))  # UTF-16 cut mid-character: an unnamed UnicodeDecodeError (a 500) before
def test_text_in_any_encoding_is_read_or_refused_in_bounds(case):
    value, encoding = case
    data = value if encoding == "raw" else value.encode(encoding, errors="replace")
    if data:
        bounded(data)


# -- images ---------------------------------------------------------------------------------------------

@st.composite
def image_files(draw):
    mode = draw(st.sampled_from(["L", "RGB", "RGBA", "P", "1", "CMYK"]))
    size = (draw(st.integers(1, 300)), draw(st.integers(1, 300)))
    fmt = draw(st.sampled_from(["PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP"]))
    img = Image.new(mode, size, draw(st.integers(0, 255)) if mode in ("L", "P", "1") else None)
    out = io.BytesIO()
    try:
        img.save(out, fmt)
    except (OSError, ValueError, KeyError):
        img.convert("RGB").save(out, fmt)
    return out.getvalue()


@FUZZ
@given(mutated(image_files()))
def test_images_are_decoded_or_refused_in_bounds(data):
    if data:
        bounded(data)


def test_the_property_fails_a_reader_that_stalls_or_raises_unnamed(monkeypatch):
    """The property itself: a reader over the budget, or one raising anything but InvalidInput, fails it."""
    monkeypatch.delenv("FUZZ_SAVE", raising=False)
    monkeypatch.setattr(__import__(__name__), "BUDGET_S", 0.05)
    monkeypatch.setitem(READERS, "text", lambda d: time.sleep(0.1))
    with pytest.raises(AssertionError, match="for 5 bytes"):
        bounded(b"hello")
    monkeypatch.setitem(READERS, "text", lambda d: {}["x"])
    with pytest.raises(KeyError):
        bounded(b"hello")
