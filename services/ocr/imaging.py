"""Image input: safe decoding (limits checked before pixels are decoded), PDF pages, preprocessing.

Everything here is pure and synchronous (it runs in worker threads); bad input raises
:class:`~services.bootstrap.errors.InvalidInput` naming the field, never a bare library error.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter, ImageOps, UnidentifiedImageError

from services.bootstrap.errors import InvalidInput, Violation

PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True)
class Limits:
    """Input limits: bytes per upload, pixels per decoded image, pages per document, and the work inside a file.

    The work bounds (services/ocr/files.py enforces them where the work happens): characters of one PDF
    page's text layer and of one file's text, bytes of XML a DOCX's parts inflate to, and elements of a
    parsed DOCX or HTML document. A real dense page holds ~5,000 characters and a 300-page book's
    document.xml ~10 MB; the bounds sit well above both.
    """

    max_bytes: int = 20_000_000
    max_pixels: int = 40_000_000
    max_pages: int = 50
    pdf_dpi: int = 200
    max_page_chars: int = 100_000
    max_file_chars: int = 2_000_000
    max_xml_bytes: int = 40_000_000
    max_nodes: int = 2_000_000


def _bad(field: str, description: str) -> InvalidInput:
    return InvalidInput(f"{field}: {description}", [Violation(field, description)])


def is_pdf(data: bytes) -> bool:
    """Whether the bytes start like a PDF."""
    return data[:1024].lstrip().startswith(PDF_MAGIC)


def _header_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG or GIF header (Pillow will not identify a 0x0 image at all)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    return None


def decode_image(data: bytes, limits: Limits, field: str = "content") -> Image.Image:
    """Bytes -> an RGB/L image with EXIF orientation applied; limits are checked before decoding."""
    if not data:
        raise _bad(field, "empty: zero bytes")
    if len(data) > limits.max_bytes:
        raise _bad(field, f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))  # reads the header only
            width, height = img.size
            if width * height > limits.max_pixels:
                raise _bad(field, f"{width}x{height} = {width * height} pixels is over the limit of "
                                  f"{limits.max_pixels} (decompression bomb guard)")
            img.load()
    except InvalidInput:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        # Pillow refuses these itself before the header is ours to read; name the limit and the size.
        size = _header_size(data)
        pixels = f"{size[0]}x{size[1]} = {size[0] * size[1]} pixels" if size else "the image"
        raise _bad(field, f"{pixels} is over the limit of {limits.max_pixels} (decompression bomb guard; "
                          f"Pillow: {err})") from None
    except UnidentifiedImageError as err:
        size = _header_size(data)
        if size is not None and 0 in size:
            raise _bad(field, f"image has no pixels ({size[0]}x{size[1]})") from None
        raise _bad(field, f"not a readable image ({type(err).__name__})") from None
    except (OSError, SyntaxError, ValueError, EOFError) as err:
        raise _bad(field, f"corrupt or truncated image ({err})") from None
    if width == 0 or height == 0:
        raise _bad(field, "image has no pixels")
    return ImageOps.exif_transpose(img) or img


def _open_pdf(data: bytes, limits: Limits, field: str):
    """A pypdfium2 document, or InvalidInput for oversized or unreadable bytes."""
    import pypdfium2 as pdfium

    if len(data) > limits.max_bytes:
        raise _bad(field, f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as err:
        raise _bad(field, f"unreadable PDF ({err})") from None


def render_pdf(data: bytes, limits: Limits, field: str = "content", max_pages: int | None = None,
               hint: str = "") -> list[Image.Image]:
    """PDF bytes -> one image per page (``limits.pdf_dpi``), refusing over ``limits.max_pages``."""
    import pypdfium2 as pdfium

    pdf = _open_pdf(data, limits, field)
    try:
        n = len(pdf)
        if n == 0:
            raise _bad(field, "PDF has no pages")
        cap = min(limits.max_pages, max_pages or limits.max_pages)
        if n > cap:
            raise _bad(field, f"PDF has {n} pages, over the limit of {cap}{hint}")
        pages = []
        for i in range(n):
            page = pdf[i]
            w, h = page.get_size()
            scale = limits.pdf_dpi / 72
            if w * h * scale * scale > limits.max_pixels:  # as services/ocr/files.py page_scale: boxes agree
                scale = (limits.max_pixels / (w * h)) ** 0.5
            pages.append(page.render(scale=scale, grayscale=True).to_pil())
            page.close()
        return pages
    except pdfium.PdfiumError as err:
        raise _bad(field, f"unreadable PDF page ({err})") from None
    finally:
        pdf.close()


def load_pages(data: bytes, limits: Limits, field: str = "content", max_pages: int | None = None,
               hint: str = "") -> list[Image.Image]:
    """One upload (an image or a PDF) -> its pages as images (a PDF's page count checked before rendering)."""
    if not data:
        raise _bad(field, "empty: zero bytes")
    if is_pdf(data):
        return render_pdf(data, limits, field, max_pages, hint)
    return [decode_image(data, limits, field)]


def count_pages(data: bytes, limits: Limits, field: str = "content") -> int:
    """Validate one upload and count its pages without rendering PDF pages (job submission)."""
    if not data:
        raise _bad(field, "empty: zero bytes")
    if not is_pdf(data):
        decode_image(data, limits, field)
        return 1
    pdf = _open_pdf(data, limits, field)
    try:
        n = len(pdf)
    finally:
        pdf.close()
    if n == 0:
        raise _bad(field, "PDF has no pages")
    return n


@dataclass(frozen=True)
class Preprocess:
    """Which preprocessing steps run (the bench turns them off one by one)."""

    max_side: int = 1920
    deskew: bool = True
    max_skew_deg: float = 12.0
    smooth_radius: float = 0.0  # off: a fixed blur hurt photographed pages and covers (bench/ocr.py)


def to_gray(img: Image.Image, max_side: int) -> Image.Image:
    """Grayscale, long side at most ``max_side`` (never upscaled)."""
    if img.mode in ("RGBA", "LA", "P"):
        img = img.convert("RGBA")
        background = Image.new("RGBA", img.size, (255, 255, 255, 255))
        img = Image.alpha_composite(background, img)
    gray = img.convert("L")
    long_side = max(gray.size)
    if long_side > max_side:
        ratio = max_side / long_side
        gray = gray.resize((max(1, round(gray.width * ratio)), max(1, round(gray.height * ratio))),
                           Image.Resampling.LANCZOS)
    return gray


def _ink_points(gray: Image.Image, width: int = 500) -> np.ndarray:
    """Coordinates (x, y) of ink pixels (dark or light text on its background) on a small copy."""
    if gray.width > width:
        gray = gray.resize((width, max(1, round(gray.height * width / gray.width))), Image.Resampling.BILINEAR)
    a = np.asarray(gray, dtype=np.float32)
    ys, xs = np.nonzero(np.abs(a - float(np.median(a))) > 60)
    return np.stack([xs, ys], axis=1).astype(np.float32)


def _profile_score(points: np.ndarray, angle: float) -> float:
    """How sharply text rows line up when the page is turned by ``angle``: energy of row-ink changes."""
    rad = np.deg2rad(angle)
    rows = points[:, 1] * np.cos(rad) - points[:, 0] * np.sin(rad)
    hist = np.bincount((rows - rows.min()).astype(np.int64))
    return float(np.square(np.diff(hist.astype(np.float64))).sum())


def estimate_skew(gray: Image.Image, max_deg: float = 12.0) -> float:
    """The rotation (degrees, counter-clockwise) that makes text lines horizontal; 0 when unsure."""
    points = _ink_points(gray)
    if len(points) < 50:
        return 0.0
    coarse = np.arange(-max_deg, max_deg + 0.01, 0.5)
    best = float(coarse[int(np.argmax([_profile_score(points, a) for a in coarse]))])
    fine = np.arange(best - 0.5, best + 0.51, 0.1)
    scores = [_profile_score(points, a) for a in fine]
    angle = float(fine[int(np.argmax(scores))])
    # Short or sparse text (receipts, covers) gives flat profiles: turn only for a clear gain.
    if max(scores) < 1.25 * _profile_score(points, 0.0):
        return 0.0
    return round(angle, 2)


def deskew(gray: Image.Image, max_deg: float = 12.0) -> tuple[Image.Image, float]:
    """Rotate ``gray`` so its text is horizontal; returns the image and the angle applied."""
    angle = estimate_skew(gray, max_deg)
    if abs(angle) < 0.3:
        return gray, 0.0
    background = int(np.median(np.asarray(gray)))
    return gray.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=background), angle


def preprocess(img: Image.Image, options: Preprocess) -> tuple[Image.Image, float]:
    """Grayscale, bound the size, deskew; returns the image for OCR and the skew angle applied."""
    gray = to_gray(img, options.max_side)
    angle = 0.0
    if options.deskew:
        gray, angle = deskew(gray, options.max_skew_deg)
    if options.smooth_radius > 0:
        gray = gray.filter(ImageFilter.GaussianBlur(options.smooth_radius))
    return gray, angle
