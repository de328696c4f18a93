"""Korean documents made here in each format a file can come as, with the text each page truly holds.

For ``bench.files`` and the file-reading tests: digital PDFs from two generators with Korean fonts
(reportlab and fpdf2, both embedding a subset of a Nanum TrueType font), scanned PDFs (the page rendered
to pixels, turned a little and noised, so no text layer exists), Word documents (python-docx: paragraphs
and a table) and HTML pages. The text is the OCR set's sentences (bench/ocr_set.py) and résumé lines with
made-up personal data; ``seed`` picks which, so a tune set and a report set are different documents.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageFilter

from bench.ocr_set import FONT_DIR, GIVEN, SENTENCES, SURNAMES, _font, render_lines

FONTS = ["NanumGothic.ttf", "NanumMyeongjo.ttf", "NanumBarunGothic.ttf"]
SOURCES = ("reportlab", "fpdf2", "scan", "docx", "html")


@dataclass
class FileSample:
    """One document: its bytes, the generator that made it, and each page's true text."""

    name: str
    kind: str  # pdf | docx | html
    source: str  # one of SOURCES
    data: bytes
    pages: list[str]

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages)


def resume_lines(rng: random.Random) -> list[str]:
    """Résumé lines with made-up personal data (phone, e-mail) and career facts."""
    name = rng.choice(SURNAMES) + rng.choice(GIVEN)
    phone = f"010-{rng.randint(2000, 9999)}-{rng.randint(1000, 9999)}"
    user = rng.choice(["dev", "hello", "career", "job"]) + str(rng.randint(10, 99))
    years = rng.randint(1, 9)
    return [f"이력서 - {name}", f"연락처: {phone}", f"이메일: {user}@example.com",
            f"경력: 백엔드 개발 {years}년, 자바와 스프링으로 결제 시스템 운영",
            "보유 기술: Java, Spring Boot, Kafka, MySQL, Redis"]


def page_lines(rng: random.Random, n: int) -> list[str]:
    """``n`` lines of ordinary Korean prose, as the OCR set writes it."""
    start = rng.randrange(len(SENTENCES))
    return [SENTENCES[(start + k) % len(SENTENCES)] for k in range(n)]


def reportlab_pdf(pages: list[list[str]], font: str) -> bytes:
    """A digital PDF written by reportlab, the font's subset embedded (12 points)."""
    return reportlab_pdf_sized(pages, font, 12)


def fpdf2_pdf(pages: list[list[str]], font: str) -> bytes:
    """A digital PDF written by fpdf2, the font's subset embedded."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.add_font("body", fname=str(FONT_DIR / font))
    for lines in pages:
        pdf.add_page()
        pdf.set_font("body", size=12)
        for line in lines:
            pdf.cell(0, 9, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scanned_pdf(pages: list[list[str]], font: str, rng: random.Random) -> bytes:
    """Pages rendered at ~200 dpi, turned up to 1.5 degrees, lightly blurred: pixels only, no text layer."""
    images = []
    for lines in pages:
        img = render_lines(lines, _font(font, 34), margin=120, spacing=1.7, width=1654).convert("L")
        page = Image.new("L", (1654, max(2339, img.height)), 255)
        page.paste(img, (0, 0))
        page = page.rotate(rng.uniform(-1.5, 1.5), fillcolor=255, resample=Image.Resampling.BICUBIC)
        images.append(page.filter(ImageFilter.GaussianBlur(0.6)))
    buf = io.BytesIO()
    images[0].save(buf, format="PDF", save_all=True, append_images=images[1:], resolution=200)
    return buf.getvalue()


def docx_file(lines: list[str]) -> bytes:
    """Paragraphs, then the last four lines as a two-column table (each row: two lines)."""
    import docx

    document = docx.Document()
    body, table = lines[:-4], lines[-4:]
    for line in body:
        document.add_paragraph(line)
    t = document.add_table(rows=2, cols=2)
    for k, line in enumerate(table):
        t.cell(k // 2, k % 2).text = line
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def html_file(lines: list[str]) -> bytes:
    """An HTML page: the first line its title, the second a heading, a list, then paragraphs (with a script)."""
    items = "".join(f"<li>{line}</li>" for line in lines[2:5])
    rest = "".join(f"<p>{line}</p>" for line in lines[5:])
    return (f'<!DOCTYPE html><html lang="ko"><head><meta charset="utf-8"><title>{lines[0]}</title>'
            f"<style>body{{font-family:sans-serif}}</style><script>var page = 1;</script></head>"
            f"<body><h1>{lines[1]}</h1><ul>{items}</ul>{rest}</body></html>").encode()


def build_files(seed: int, per_source: int = 2, pages: int = 2, lines: int = 14) -> list[FileSample]:
    """``per_source`` documents of each source; PDFs of ``pages`` pages, each ``lines`` lines long."""
    rng = random.Random(seed)
    out: list[FileSample] = []
    for k in range(per_source):
        font = FONTS[k % len(FONTS)]
        doc = [resume_lines(rng) + page_lines(rng, lines - 5) if p == 0 else page_lines(rng, lines)
               for p in range(pages)]
        out.append(FileSample(f"reportlab-{k}", "pdf", "reportlab", reportlab_pdf(doc, font),
                              ["\n".join(p) for p in doc]))
        doc = [resume_lines(rng) + page_lines(rng, lines - 5) if p == 0 else page_lines(rng, lines)
               for p in range(pages)]
        out.append(FileSample(f"fpdf2-{k}", "pdf", "fpdf2", fpdf2_pdf(doc, font), ["\n".join(p) for p in doc]))
        doc = [resume_lines(rng) + page_lines(rng, 7) if p == 0 else page_lines(rng, 12) for p in range(pages)]
        out.append(FileSample(f"scan-{k}", "pdf", "scan", scanned_pdf(doc, font, rng), ["\n".join(p) for p in doc]))
        flat = resume_lines(rng) + page_lines(rng, lines)
        out.append(FileSample(f"docx-{k}", "docx", "docx", docx_file(flat), ["\n".join(flat)]))
        flat = resume_lines(rng) + page_lines(rng, lines)
        out.append(FileSample(f"html-{k}", "html", "html", html_file(flat), ["\n".join(flat)]))
    return out


def long_pdf(seed: int, pages: int) -> FileSample:
    """A digital PDF of ``pages`` pages (the time to a searchable file)."""
    rng = random.Random(seed)
    doc = [page_lines(rng, 30) for _ in range(pages)]
    return FileSample(f"long-{pages}", "pdf", "reportlab", reportlab_pdf(doc, FONTS[0]), ["\n".join(p) for p in doc])


@dataclass
class GoldEntity:
    """Personal data drawn on a page: its kind, text and the box of its ink (pixels: left, top, width, height)."""

    kind: str
    text: str
    box: tuple[int, int, int, int]


def resume_pdfs(seed: int, n: int, dpi: int = 200) -> list[tuple[bytes, list[GoldEntity]]]:
    """One-page digital résumés (reportlab) with phones and e-mails, and where each one's ink is.

    The box of each value is placed by the font's advance widths (reportlab's ``stringWidth``) and closed to
    the dark pixels of the page rendered at ``dpi`` inside that place: the ink, not the glyph boxes the PDF
    reports (what the reader under test uses).
    """
    import numpy as np
    import pypdfium2 as pdfium
    from reportlab.pdfbase.pdfmetrics import stringWidth

    rng = random.Random(seed)
    out = []
    for k in range(n):
        font = FONTS[k % len(FONTS)]
        size = rng.choice([10, 11, 12, 14])
        phone = f"010-{rng.randint(2000, 9999)}-{rng.randint(1000, 9999)}"
        office = f"02-{rng.randint(300, 999)}-{rng.randint(1000, 9999)}"
        email = f"{rng.choice(['dev', 'hello', 'career', 'job', 'kim', 'lee'])}{rng.randint(10, 999)}@example.com"
        name = rng.choice(SURNAMES) + rng.choice(GIVEN)
        lines = [(f"이력서 - {name}", []), (f"휴대폰: {phone}", [("phone", phone)]),
                 (f"이메일: {email}", [("email", email)]), (f"자택 전화 {office}", [("phone", office)]),
                 *((line, []) for line in page_lines(rng, 6))]
        data = reportlab_pdf_sized([[line for line, _ in lines]], font, size)
        pdf = pdfium.PdfDocument(data)
        image = np.asarray(pdf[0].render(scale=dpi / 72, grayscale=True).to_pil())
        pdf.close()
        scale, name_ = dpi / 72, Path(font).stem
        gold = []
        for i, (line, values) in enumerate(lines):
            baseline = (841.89 - (780 - 22 * i)) * scale
            for kind, value in values:
                x0 = (60 + stringWidth(line[:line.index(value)], name_, size)) * scale
                x1 = x0 + stringWidth(value, name_, size) * scale
                top, bottom = int(baseline - size * 1.1 * scale), int(baseline + size * 0.4 * scale)
                band = image[top:bottom, int(x0) - 2:int(x1) + 2] < 128
                rows, cols = np.nonzero(band)
                gold.append(GoldEntity(kind, value, (int(x0) - 2 + int(cols.min()), top + int(rows.min()),
                                                     int(cols.max() - cols.min()) + 1,
                                                     int(rows.max() - rows.min()) + 1)))
        out.append((data, gold))
    return out


def reportlab_pdf_sized(pages: list[list[str]], font: str, size: int) -> bytes:
    """As :func:`reportlab_pdf`, in ``size`` points."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    name = Path(font).stem
    if name not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(name, str(FONT_DIR / font)))
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    for lines in pages:
        c.setFont(name, size)
        for i, line in enumerate(lines):
            c.drawString(60, 780 - 22 * i, line)
        c.showPage()
    c.save()
    return buf.getvalue()
