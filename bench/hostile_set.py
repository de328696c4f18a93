"""Small hostile files, made here: each costs its reader far more work than its bytes suggest.

For ``bench.hostile`` and the tests that keep every input that once stalled a service
(tests/service/test_hostile_files.py, tests/unit/ocr/test_file_bounds.py). Each builder takes the size of
the attack, so a test can make a small one and the bench the one an attacker would send:

- :func:`html_comments`: empty comments and no tag (the 281-byte upload that stopped the OCR service);
- :func:`pdf_shared_stream`: many pages drawing one Flate stream of text (34 KB, 400 M characters);
- :func:`pdf_dense_page`: one page whose layer holds ``chars`` characters;
- :func:`docx_inflated`: a Word document whose XML inflates ``ratio`` times, under the zip's ratio guard;
- :func:`html_nested`: elements nested ``depth`` deep;
- :func:`scanned_with_layer`: a scanned page under an invisible text layer that misreads the page.
"""

from __future__ import annotations

import io
import random
import zipfile
import zlib

from PIL import Image


def html_comments(n: int = 40) -> bytes:
    """``n`` empty comments and a byte that is no tag (n=40: 281 bytes)."""
    return b"<!---->" * n + b"x"


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF from numbered object bodies (object k+1 is ``objects[k]``), with a valid xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for k, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % k + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def _text_stream(chars: int, seed: int = 0) -> bytes:
    """A content stream showing ``chars`` characters of Latin text, tiny, in lines of 100."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    lines, n = [], 0
    while n < chars:
        line = b" ".join(rng.choice(words) for _ in range(14))[:100]
        lines.append(b"(" + line + b") Tj T*")
        n += len(line) + 1
    return b"BT /F1 1 Tf 1 TL 10 800 Td " + b"\n".join(lines) + b" ET"


def pdf_shared_stream(pages: int = 200, chars: int = 2_000_000) -> bytes:
    """``pages`` pages that all draw one Flate-compressed stream of ``chars`` characters."""
    stream = zlib.compress(_text_stream(chars), 9)
    kids = b" ".join(b"%d 0 R" % (5 + k) for k in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents 4 0 R >>"] * pages
    return _pdf(objects)


def pdf_dense_page(chars: int) -> bytes:
    """One page whose text layer holds about ``chars`` characters."""
    return pdf_shared_stream(1, chars)


def docx_inflated(paragraphs: int, seed: int = 0) -> bytes:
    """A Word document of ``paragraphs`` paragraphs of varied text: the XML compresses ~5x, under any ratio guard."""
    rng = random.Random(seed)
    syllables = [chr(0xAC00 + rng.randrange(11172)) for _ in range(400)]
    body = io.StringIO()
    for _ in range(paragraphs):
        text = "".join(rng.choice(syllables) for _ in range(40))
        body.write(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>")
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = f'<?xml version="1.0" encoding="UTF-8"?><w:document {ns}><w:body>{body.getvalue()}</w:body></w:document>'
    return _docx(document.encode("utf-8"))


def _docx(document: bytes) -> bytes:
    types = (b'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
             b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
             b'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
             b'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.'
             b'main+xml"/></Types>')
    rels = (b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            b'2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            b'relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", types)
        z.writestr("_rels/.rels", rels)
        z.writestr("word/document.xml", document)
    return out.getvalue()


def docx_nodes(elements: int) -> bytes:
    """A Word document of ``elements`` empty runs in one paragraph (many nodes, little text)."""
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    runs = "<w:r/>" * elements
    return _docx(f'<w:document {ns}><w:body><w:p>{runs}</w:p></w:body></w:document>'.encode())


def html_nested(depth: int) -> bytes:
    """An HTML page with ``depth`` nested elements around one word."""
    return b"<html><body>" + b"<div>" * depth + "깊은".encode() + b"</div>" * depth + b"</body></html>"


def scanned_with_layer(lines: list[str], layer: list[str]) -> bytes:
    """A scanned page (``lines`` drawn as pixels) under an invisible text layer (``layer``, render mode 3).

    What a scanner's "searchable PDF" is: the image is the page; the layer is the scanner's own OCR,
    which may misread or drop what the image shows.
    """
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    from bench.ocr_set import _font, render_lines

    image: Image.Image = render_lines(lines, _font("NanumGothic.ttf", 30), width=1240)
    out = io.BytesIO()
    width, height = 595, 842
    c = canvas.Canvas(out, pagesize=(width, height))
    scale = min(width / image.width, height / image.height)
    c.drawImage(ImageReader(image), 0, height - image.height * scale, image.width * scale, image.height * scale)
    text = c.beginText(40, height - 60)
    text.setTextRenderMode(3)  # invisible: neither filled nor stroked
    text.setFont("Helvetica", 12)
    for line in layer:
        text.textLine(line)
    c.drawText(text)
    c.showPage()
    c.save()
    return out.getvalue()
