"""Files in, text out: a file's type read from its bytes, and its text read the way the type allows.

- **PDF**: each page's text layer through pdfium (pypdfium2, BSD/Apache: the library the service already
  renders pages with), with each character's box; a page whose layer is missing or unusable (see
  :func:`layer_problem`) is rendered and read by OCR instead (the caller's job: :class:`FileReading`
  names those pages).
- **DOCX**: paragraphs and tables in document order (python-docx), after the zip's sizes are checked.
- **HTML**: the text of the body, scripts and styles left out, blocks on lines of their own (lxml).
- **Plain text**: UTF-8 (with or without a byte-order mark), UTF-16 with one, or CP949 (older Korean files).
- **Images**: the OCR service's own path.

The type comes from the content (magic bytes), never the file's name: a PNG named ``.pdf`` is read as a
PNG. Every bound is an :class:`~services.bootstrap.errors.InvalidInput` naming it — bytes, pages, the
zip's inflated size and ratio, a password, a type that is none of these — so a bad file is a clear 400
and the service goes on serving. Pure and synchronous: the servicer runs these on its worker threads.
"""

from __future__ import annotations

import io
import itertools
import math
import re
import unicodedata
import zipfile
import zlib
from array import array
from dataclasses import dataclass, field

from services.bootstrap.errors import InvalidInput, Violation
from services.ocr.imaging import Limits, is_pdf

IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"II*\x00", b"MM\x00*", b"BM")
# Possessive and atomic throughout: an XML declaration, then comments, each taken whole and never given
# back, so a page of 40 empty comments and no tag fails at once instead of trying every way to split them
# (the backtracking form of this pattern stalled the service for hours on 281 bytes).
HTML_START = re.compile(rb"^\s*+(?:<\?xml[^>]*+>\s*+)?+(?:<!--(?>.*?-->)\s*+)*+"
                        rb"<(?:!doctype\s++html|html|head|body|meta|title)\b", re.IGNORECASE | re.DOTALL)
# Characters a usable text layer does not hold many of: unmapped glyphs (U+FFFD), private-use code points
# (a font without a Unicode map), control characters.
UNMAPPED = re.compile(r"[\ufffd\ue000-\uf8ff\U000f0000-\U0010ffff\x00-\x08\x0b\x0c\x0e-\x1f]")
MIN_LAYER_CHARS = 10  # fewer non-space characters on a page that holds an image: a scan, read by OCR
MAX_UNMAPPED = 0.05  # share of unmapped characters above which a layer is garbage
MAX_IMPLAUSIBLE = 0.35  # share of implausible Korean (services/ocr/plausibility.py) above which it is garbage
MAX_ZIP_RATIO = 100  # inflated / compressed size of one member of a DOCX
MAX_ZIP_MEMBERS = 2000
KINDS = ("pdf", "docx", "html", "text", "image")


def _bad(description: str, field_name: str = "content") -> InvalidInput:
    return InvalidInput(f"{field_name}: {description}", [Violation(field_name, description)])


def sniff(data: bytes) -> str:
    """The file's type from its bytes: one of :data:`KINDS` (InvalidInput for an empty or unknown file)."""
    if not data:
        raise _bad("empty: zero bytes")
    head = data[:2048]
    if is_pdf(data):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "docx"  # checked as a Word document when opened
    if head.startswith(IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "image"
    text = head.lstrip(b"\xef\xbb\xbf")
    if HTML_START.match(text):
        return "html"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" not in head:
        return "text"
    raise _bad("not a type this service reads (PDF, DOCX, HTML, plain text, PNG, JPEG, TIFF, WebP, BMP, GIF); "
               "the type is read from the bytes, not the name")


@dataclass
class Char:
    """One character of a text layer and its box in the page as rendered (pixels: left, top, right, bottom)."""

    text: str
    box: tuple[int, int, int, int] | None


NO_BOX = -1  # a character without a box (white space) in :attr:`LayerPage.boxes`


@dataclass
class LayerPage:
    """One PDF page's text layer, or why it cannot be used (``problem``: the page is then read by OCR).

    The characters are kept compact (they cross a process boundary): ``raw`` as extracted and ``boxes``,
    four ints per character (:data:`NO_BOX` for white space); :attr:`chars` builds the objects.
    """

    index: int
    text: str
    raw: str = ""
    boxes: array = field(default_factory=lambda: array("i"))
    size: tuple[int, int] = (0, 0)  # the page rendered at the service's PDF resolution, in pixels
    problem: str = ""
    has_image: bool = False  # the page draws an image (a scan under its layer: masking reads it too)

    @property
    def chars(self) -> list[Char]:
        """The layer's characters with their boxes."""
        b = self.boxes
        return [Char(c, None if b[4 * k] == NO_BOX else (b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]))
                for k, c in enumerate(self.raw)]


@dataclass
class FileReading:
    """What a file holds: its type and, per page, the text (PDF pages without a usable layer: ``problem``)."""

    kind: str
    pages: list[LayerPage]


def layer_problem(text: str, has_image: bool, implausible: float | None) -> str:
    """Why a page's text layer is not to be used ('' when it is).

    ``no_text_layer``: fewer than :data:`MIN_LAYER_CHARS` characters on a page that holds an image (a
    scan; a page with neither is simply empty). ``unmapped_glyphs``: over :data:`MAX_UNMAPPED` of its
    characters unmapped (a font without a Unicode map gives U+FFFD or private-use code points).
    ``implausible_text``: over :data:`MAX_IMPLAUSIBLE` implausible by the OCR service's Korean check
    (glyphs mapped to the wrong characters). The thresholds were set before any evaluation.
    """
    chars = "".join(text.split())
    if len(chars) < MIN_LAYER_CHARS:
        return "no_text_layer" if has_image else ""
    if len(UNMAPPED.findall(chars)) / len(chars) > MAX_UNMAPPED:
        return "unmapped_glyphs"
    if implausible is not None and implausible > MAX_IMPLAUSIBLE:
        return "implausible_text"
    return ""


def _open_pdf(data: bytes, limits: Limits, max_pages: int, field_name: str):
    import pypdfium2 as pdfium

    if len(data) > limits.max_bytes:
        raise _bad(f"{len(data)} bytes is over the limit of {limits.max_bytes}", field_name)
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as err:
        if "password" in str(err).lower():
            raise _bad("the PDF is encrypted: it needs a password to be read", field_name) from None
        raise _bad(f"unreadable PDF ({err})", field_name) from None
    n = len(pdf)
    if n == 0:
        pdf.close()
        raise _bad("the PDF has no pages", field_name)
    if n > max_pages:
        pdf.close()
        raise _bad(f"the PDF has {n} pages, over the limit of {max_pages}", field_name)
    return pdf


def page_scale(width: float, height: float, limits: Limits) -> float:
    """Pixels per PDF point a page is rendered at: ``limits.pdf_dpi``, less when that is over ``max_pixels``."""
    scale = limits.pdf_dpi / 72
    if width * height * scale * scale > limits.max_pixels:
        scale = (limits.max_pixels / (width * height)) ** 0.5
    return scale


def read_pdf(data: bytes, limits: Limits, max_pages: int, field_name: str = "content") -> FileReading:
    """Every page's text layer with character boxes (pixels of the page as rendered), each judged usable or not.

    Bounded by its work, not only the file's bytes: pages share content streams, so a 34 KB file can
    name hundreds of millions of characters. Each page's characters are counted before any is read
    (``limits.max_page_chars``), and the file's total is kept (``limits.max_file_chars``); either
    over its bound is a 400 naming it. The layer's Korean plausibility is judged by :func:`judge_layers`
    in the service, on a bounded sample. Run in a child process (services/ocr/sandbox.py).
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = _open_pdf(data, limits, max_pages, field_name)
    pages: list[LayerPage] = []
    total = 0
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            try:
                width, height = page.get_size()
                scale = page_scale(width, height, limits)
                textpage = page.get_textpage()
                count = textpage.count_chars()
                if count > limits.max_page_chars:
                    raise _bad(f"page {i + 1}'s text layer holds {count:,} characters, over the limit of "
                               f"{limits.max_page_chars:,} a page", field_name)
                total += count
                if total > limits.max_file_chars:
                    raise _bad(f"the text layers hold over {limits.max_file_chars:,} characters by page {i + 1} "
                               "(the limit of one file)", field_name)
                text = textpage.get_text_range()
                kept: list[str] = []
                boxes = array("i")
                for k, c in enumerate(text):
                    if c == "\r":
                        continue
                    kept.append(c)
                    if c.isspace():
                        boxes.extend((NO_BOX, NO_BOX, NO_BOX, NO_BOX))
                    else:
                        boxes.extend(_pixels(textpage.get_charbox(k), scale, height))  # the glyph's own box
                has_image = False
                for obj in page.get_objects():
                    if obj.type == raw.FPDF_PAGEOBJ_IMAGE:
                        has_image = True
                        break
                textpage.close()
            finally:
                page.close()
            as_read = "".join(kept)
            clean = unicodedata.normalize("NFC", as_read)
            if len(clean) != len(as_read):
                clean = as_read  # composed forms would move the boxes: keep as written
            pages.append(LayerPage(i, clean, as_read, boxes, (round(width * scale), round(height * scale)),
                                   layer_problem(clean, has_image, None), has_image))
    except pdfium.PdfiumError as err:
        raise _bad(f"unreadable PDF page ({err})", field_name) from None
    finally:
        pdf.close()
    return FileReading("pdf", pages)


def _pixels(box: tuple[float, float, float, float], scale: float, height: float) -> tuple[int, int, int, int]:
    """A glyph's box (PDF points: left, bottom, right, top) in pixels of the page as rendered: left, top, right, bottom.

    A degenerate font matrix gives boxes of NaN or beyond any page; such a glyph has no box (:data:`NO_BOX`).
    """
    left, bottom, right, top = box
    out = (left * scale, (height - top) * scale, right * scale, (height - bottom) * scale)
    if not all(math.isfinite(v) and abs(v) < 1e7 for v in out):
        return NO_BOX, NO_BOX, NO_BOX, NO_BOX
    return round(out[0]), round(out[1]), round(out[2]), round(out[3])


PLAUSIBILITY_SAMPLE = 2_000  # characters of a page's layer the Korean check reads: enough to tell garbage


def judge_layers(reading: FileReading, plausibility) -> FileReading:
    """Each usable page's layer judged by the Korean plausibility check, on its first :data:`PLAUSIBILITY_SAMPLE` chars.

    A layer whose glyphs map to the wrong characters is garbage throughout, so a sample tells; the
    check's cost (Kiwi) is then bounded by the page count, whatever a page holds.
    """
    for page in reading.pages:
        if page.problem or not page.text.strip():
            continue
        sample = page.text[:PLAUSIBILITY_SAMPLE]
        page.problem = layer_problem(page.text, False, plausibility.score(sample).implausible_share)
    return reading


def render_pages(data: bytes, limits: Limits, indices: list[int]):
    """The listed PDF pages as grayscale images at ``limits.pdf_dpi`` (bounded by ``limits.max_pixels``)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    try:
        out = []
        for i in indices:
            page = pdf[i]
            width, height = page.get_size()
            out.append(page.render(scale=page_scale(width, height, limits), grayscale=True).to_pil())
            page.close()
        return out
    finally:
        pdf.close()


def _check_zip(data: bytes, limits: Limits) -> zipfile.ZipFile:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError) as err:
        raise _bad(f"a zip file that cannot be opened (truncated or corrupt: {err})") from None
    if len(members) > MAX_ZIP_MEMBERS:
        raise _bad(f"the zip holds {len(members)} files, over the limit of {MAX_ZIP_MEMBERS}")
    inflated = sum(m.file_size for m in members)
    if inflated > limits.max_bytes * 5:
        raise _bad(f"the zip inflates to {inflated} bytes, over the limit of {limits.max_bytes * 5} "
                   "(decompression bomb guard)")
    for m in members:
        if m.file_size > MAX_ZIP_RATIO * max(m.compress_size, 1) and m.file_size > 1_000_000:
            raise _bad(f"{m.filename!r} inflates {m.file_size // max(m.compress_size, 1)}x, over the limit of "
                       f"{MAX_ZIP_RATIO}x (decompression bomb guard)")
    if "word/document.xml" not in {m.filename for m in members}:
        raise _bad("a zip file that is not a Word document (no word/document.xml)")
    xml = sum(m.file_size for m in members if m.filename.endswith((".xml", ".rels")))
    if xml > limits.max_xml_bytes:
        raise _bad(f"the document's XML parts inflate to {xml:,} bytes, over the limit of {limits.max_xml_bytes:,}")
    return archive


def _count_elements(archive: zipfile.ZipFile, name: str, limit: int) -> None:
    """Stream one XML part and count its elements, stopping at ``limit`` (no tree is kept)."""
    from lxml import etree

    count = 0
    # A member whose header is broken (BadZipFile), whose stream is cut or corrupt (zlib.error, EOFError), whose
    # compression zipfile lacks (NotImplementedError) or that is encrypted (RuntimeError) is the file's fault.
    try:
        with archive.open(name) as part:
            for _, element in etree.iterparse(part, events=("end",), resolve_entities=False, no_network=True,
                                              huge_tree=False):
                count += 1
                if count > limit:
                    raise _bad(f"{name} holds over {limit:,} XML elements, the limit of one document")
                element.clear(keep_tail=False)
    except etree.XMLSyntaxError as err:
        raise _bad(f"an unreadable Word document ({name}: {str(err)[:120]})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as err:
        raise _bad(f"a zip member that cannot be read ({name}: {type(err).__name__}: {str(err)[:100]})") from None


def read_docx(data: bytes, limits: Limits) -> FileReading:
    """A Word document's paragraphs and tables in order: table cells joined by tabs, rows by lines."""
    if len(data) > limits.max_bytes:
        raise _bad(f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    archive = _check_zip(data, limits)
    _count_elements(archive, "word/document.xml", limits.max_nodes)
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as err:  # noqa: BLE001 - python-docx raises many kinds for a broken document
        raise _bad(f"an unreadable Word document ({type(err).__name__}: {str(err)[:120]})") from None
    lines: list[str] = []
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            lines.append(Paragraph(block, document).text)
        elif tag == "tbl":
            for row in Table(block, document).rows:
                cells: list = []
                for cell in row.cells:
                    if not cells or cells[-1] is not cell._tc:
                        cells.append(cell._tc)
                lines.append("\t".join(" ".join(p.text for p in _cell_paragraphs(tc, document)) for tc in cells))
    text = unicodedata.normalize("NFC", "\n".join(lines).strip())
    return FileReading("docx", [LayerPage(0, _bounded(text, limits))])


def _bounded(text: str, limits: Limits) -> str:
    """``text`` when it is within the file's character bound (a 400 naming it otherwise)."""
    if len(text) > limits.max_file_chars:
        raise _bad(f"the file holds {len(text):,} characters of text, over the limit of {limits.max_file_chars:,}")
    return text


def _cell_paragraphs(tc, document):
    from docx.text.paragraph import Paragraph

    return [Paragraph(p, document) for p in tc.iterchildren() if p.tag.endswith("}p")]


CHARSET = re.compile(rb"""charset=["']?+([A-Za-z0-9_.:-]++)""", re.IGNORECASE)


def declared_charset(head: bytes) -> str | None:
    """The charset a ``<meta>`` tag in ``head`` declares (the first one inside a meta tag), or None.

    Found by one scan for ``charset=`` and a look back to the tag it sits in, rather than a pattern
    that rescans from every ``<meta`` (quadratic on a page of unclosed tags).
    """
    lower = head.lower()
    for m in CHARSET.finditer(head):
        opening = lower.rfind(b"<", 0, m.start())
        if opening >= 0 and lower.startswith(b"<meta", opening) and b">" not in head[opening:m.start()]:
            return m.group(1).decode("ascii")
    return None
BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "section", "article",
          "header", "footer", "ul", "ol", "dt", "dd", "blockquote", "pre", "hr", "title", "address", "main"}


def read_html(data: bytes, limits: Limits) -> FileReading:
    """The page's visible text: scripts, styles and templates left out, each block on its own line.

    Decoded by the charset its ``<meta>`` declares, else UTF-8, else CP949.
    """
    if len(data) > limits.max_bytes:
        raise _bad(f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    import lxml.html

    declared = declared_charset(data[:4096])
    try:
        markup = data.decode(declared or "utf-8-sig")
    except (LookupError, UnicodeDecodeError):
        markup = data.decode("cp949", errors="replace")
    try:
        root = lxml.html.document_fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", markup))
    except Exception as err:  # noqa: BLE001 - lxml's parser errors
        raise _bad(f"unreadable HTML ({type(err).__name__})") from None
    nodes = sum(1 for _ in itertools.islice(root.iter(), limits.max_nodes + 1))
    if nodes > limits.max_nodes:
        raise _bad(f"the page holds over {limits.max_nodes:,} HTML elements, the limit of one document")
    for bad in root.xpath("//script|//style|//noscript|//template|//head/meta|//head/link"):
        bad.drop_tree()
    parts: list[str] = []
    # Depth first without recursion (a page may nest as deep as the parser allows): an element is entered
    # (its opening break and text), then its children, then left (its closing break and its tail).
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        el, leaving = stack.pop()
        tag = el.tag if isinstance(el.tag, str) else ""  # type: ignore[attr-defined]
        if leaving:
            if tag in BLOCKS or tag in ("td", "th"):
                parts.append("\t" if tag in ("td", "th") else "\n")
            if el is not root and el.tail:  # type: ignore[attr-defined]
                parts.append(el.tail)  # type: ignore[attr-defined]
            continue
        if tag in BLOCKS:
            parts.append("\n")
        if el.text and tag:  # type: ignore[attr-defined]
            parts.append(el.text)  # type: ignore[attr-defined]
        stack.append((el, True))
        stack.extend((child, False) for child in reversed(el))  # type: ignore[call-overload]
    lines = [" ".join(line.split()) for line in "".join(parts).splitlines()]
    text = unicodedata.normalize("NFC", "\n".join(line for line in lines if line))
    return FileReading("html", [LayerPage(0, _bounded(text, limits))])


def read_text(data: bytes, limits: Limits) -> FileReading:
    """Plain text: UTF-8, UTF-16 with a byte-order mark, or CP949."""
    if len(data) > limits.max_bytes:
        raise _bad(f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise _bad(f"UTF-16 text (it starts with a byte-order mark) that does not decode: {err.reason} at "
                       f"byte {err.start}") from None
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            try:
                text = data.decode("cp949")
            except UnicodeDecodeError:
                raise _bad("text in no encoding this service reads (UTF-8, UTF-16 with a BOM, CP949)") from None
    return FileReading("text", [LayerPage(0, _bounded(unicodedata.normalize("NFC", text.replace("\r\n", "\n")),
                                                       limits))])
