"""Per-page preprocessing: what each page needs, decided from the page itself.

Measured on the tuning split of bench/ocr_set.py (see bench/results/ocr.md): a fixed blur helps
some clean pages and more than doubles CER on photographed ones, and covers fail because Tesseract's
global binarisation drops light titles on gradients and mid-tone backgrounds and misreads very
large glyphs. So every page is

1. *flattened*: the background is estimated with a (separable) median filter on a small copy (it follows
   gradients, bands and vignetting and keeps their edges), each region's text polarity is taken
   from which side of the background its strong deviations lie (light-on-dark bands, inverted pages),
   and the deviation toward the text is stretched into dark ink on white. This removes gradients,
   inverts light text and raises low contrast in one step; the opposite-signed half of the noise is
   dropped with it;
2. *deskewed* on the flattened copy (ink is unambiguous there);
3. when it holds thin straight rules of at least two page widths in all (forms, tables, separators:
   Tesseract reads a ruled table as noise, CER 0.78 on the tuning forms), *unruled*: the rules are
   erased (:func:`rules`; issue 67);
4. when its text lines are of very different heights or far from the size Tesseract reads best
   (covers, sparse large text, tiny print), *line-normalised*: each text line is cut out, scaled to
   ``line_height`` pixels and stacked; boxes are mapped back to the deskewed page;
5. when it needed no inversion, *also read as uploaded* (:func:`as_is`): the extractor keeps
   whichever reading scores better (:mod:`services.ocr.quality`), so the few strokes flattening
   costs on some clean pages are not paid where the untouched page reads better. The extractor
   starts that reading before preparing and may keep it alone
   (:class:`services.ocr.extractor.CleanPage`, ``--accept-as-uploaded``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from PIL import Image
from scipy import ndimage

from services.ocr.imaging import estimate_skew, to_gray


@dataclass(frozen=True)
class Enhance:
    """What per-page preprocessing may do (chosen on the tuning split; see bench/ocr.py)."""

    flatten: bool = True
    deskew: bool = True
    max_skew_deg: float = 12.0
    # A page that needed no inversion and no line normalisation is also read as uploaded, and the better
    # reading kept (services.ocr.quality): chosen on the tuning split (bench/ocr_tune.py), where comparing
    # whatever the page's skew read best (limiting it to pages turned < 0.3, 2 or 5 degrees lost).
    compare_as_uploaded: bool = True
    rules: bool = True  # erase table borders and separators where the page has them
    min_rule: int = 80  # pixels: the shortest rule (and at least an eighth of the page's width)
    min_rule_share: float = 2.0  # the rules' pixels, in page widths, from which a page's rules are erased
    lines: bool = True  # line normalisation where the page needs it
    line_height: int = 48  # target height of a normalised line, pixels
    min_line: int = 22  # a page whose median line is outside [min_line, max_line] is normalised
    max_line: int = 60
    max_line_ratio: float = 1.6  # ... and so is one whose tallest line is this much taller than its median


@dataclass(frozen=True)
class Strip:
    """One text line cut from the page and placed, scaled, into the image Tesseract reads."""

    src: tuple[int, int, int, int]  # left, top, right, bottom in the deskewed page
    dst: tuple[int, int]  # left, top in the stacked image
    scale: float


@dataclass
class Prepared:
    """The image Tesseract reads, and how its pixels map back onto the (deskewed) page."""

    image: Image.Image
    page_size: tuple[int, int]
    skew: float = 0.0
    steps: list[str] = field(default_factory=list)
    strips: list[Strip] = field(default_factory=list)
    flat: Image.Image | None = None  # the flattened page before deskewing (dark ink on white)
    source_size: tuple[int, int] | None = None  # the bounded page before deskewing (default: page_size)
    measures: Flattened | None = None  # what flattening measured of the page (None: not flattened)

    def to_page(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """A (left, top, width, height) box of the read image in page coordinates."""
        if not self.strips:
            return box
        x, y, w, h = box
        centre = y + h / 2
        strip = min(self.strips, key=lambda s: 0 if s.dst[1] <= centre <= s.dst[1] + (s.src[3] - s.src[1]) * s.scale
                    else min(abs(centre - s.dst[1]), abs(centre - s.dst[1] - (s.src[3] - s.src[1]) * s.scale)))
        left = strip.src[0] + (x - strip.dst[0]) / strip.scale
        top = strip.src[1] + (y - strip.dst[1]) / strip.scale
        pw, ph = self.page_size
        left, top = min(max(0, round(left)), pw - 1), min(max(0, round(top)), ph - 1)
        return left, top, max(1, min(round(w / strip.scale), pw - left)), max(1, min(round(h / strip.scale), ph - top))


    def to_upload(self, box: tuple[int, int, int, int], upload_size: tuple[int, int]) -> tuple[int, int, int, int]:
        """A box of the read image in the uploaded image's pixels: strips undone, deskew turned back, rescaled.

        A box turned back by the skew angle is the upright rectangle around its four corners.
        """
        x, y, w, h = self.to_page(box)
        corners: list[tuple[float, float]] = [(x, y), (x + w, y), (x, y + h), (x + w, y + h)]
        sw, sh = self.source_size or self.page_size
        if self.skew:
            # PIL's rotate(skew, expand=True) turned the page counter-clockwise about its centre; turn back.
            c, s = math.cos(math.radians(self.skew)), math.sin(math.radians(self.skew))
            pw, ph = self.page_size
            corners = [((cx - pw / 2) * c - (cy - ph / 2) * s + sw / 2, (cx - pw / 2) * s + (cy - ph / 2) * c + sh / 2)
                       for cx, cy in corners]
        fx, fy = upload_size[0] / sw, upload_size[1] / sh
        xs, ys = [cx * fx for cx, _ in corners], [cy * fy for _, cy in corners]
        left, top = max(0, math.floor(min(xs))), max(0, math.floor(min(ys)))
        right, bottom = min(upload_size[0], math.ceil(max(xs))), min(upload_size[1], math.ceil(max(ys)))
        return left, top, max(1, right - left), max(1, bottom - top)


@dataclass(frozen=True)
class Flattened:
    """A flattened page and what flattening found."""

    image: Image.Image
    inverted: bool  # most text was lighter than its background
    background_range: float  # spread of the background's grey levels (gradients, vignetting, bands)
    contrast: float  # background minus the darkest ink, in grey levels


def flatten(gray: Image.Image, factor: int = 4, window: int = 15) -> Flattened:
    """Dark text on white whatever the background, with what the page looked like before."""
    w, h = gray.size
    a = np.asarray(gray, np.float32)
    small = np.asarray(gray.resize((max(1, w // factor), max(1, h // factor)), Image.Resampling.BOX), np.float32)
    size = min(window, *small.shape)
    # A median across, then down (separable): ~6x faster than the square window's, the same background
    # away from sharp corners (issue 67: preparation runs before the prepared reading can start).
    bg_small = ndimage.median_filter(ndimage.median_filter(small, size=(1, size), mode="nearest"),
                                     size=(size, 1), mode="nearest")
    dev_small = small - bg_small
    lighter = ndimage.uniform_filter(np.square(np.clip(dev_small, 0, None)), 25)
    darker = ndimage.uniform_filter(np.square(np.clip(-dev_small, 0, None)), 25)
    polarity_small = np.where(lighter > darker, 1.0, -1.0).astype(np.float32)
    inverted = bool(lighter.sum() > darker.sum())
    background = np.asarray(Image.fromarray(bg_small).resize((w, h), Image.Resampling.BILINEAR), np.float32)
    polarity = np.asarray(Image.fromarray(polarity_small).resize((w, h), Image.Resampling.NEAREST), np.float32)
    ink = np.clip(polarity * (a - background), 0, None)
    sample = ink[::2, ::2]  # every fourth pixel: the same percentiles at a quarter of the cost
    top = max(float(np.percentile(sample, 99.5)), 30.0)
    low, high = np.percentile(bg_small, [5, 95])
    return Flattened(Image.fromarray((255 - np.clip(ink * (255 / top), 0, 255)).astype(np.uint8)), inverted,
                     float(high - low), float(np.percentile(sample, 99.9)))


def _runs(flags: np.ndarray, min_gap: int) -> list[list[int]]:
    """[start, end) runs of True, merging runs closer than ``min_gap``."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    runs: list[list[int]] = []
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        if runs and start - runs[-1][1] < min_gap:
            runs[-1][1] = int(end)
        else:
            runs.append([int(start), int(end)])
    return runs


def text_lines(flat: Image.Image) -> list[tuple[int, int, int, int]]:
    """Boxes (left, top, right, bottom) of the text lines of a flattened page (horizontal ink bands)."""
    a = np.asarray(flat)
    # The 3x3 median of a binary mask is its majority: a moving average is several times faster.
    ink = ndimage.uniform_filter((a < 128).astype(np.float32), size=3) > 4.5 / 9
    h, w = ink.shape
    rows = ink.sum(axis=1) > max(2, w * 0.002)
    boxes = []
    for top, bottom in _runs(rows, 3):
        if bottom - top < 6:
            continue
        cols = np.flatnonzero(ink[top:bottom].any(axis=0))
        boxes.append((int(cols[0]), top, int(cols[-1]) + 1, bottom))
    return boxes


def rules(flat: Image.Image, min_length: int, max_thickness: int = 4) -> tuple[np.ndarray, int]:
    """The pixels (with a margin) of a flattened page's thin straight rules, and the rules' length.

    Rules are table borders, underlines and separators; the length is in the page's pixels.

    A pixel belongs to a rule when a run of ink (any tone darker than light grey) at least ``min_length``
    long passes through it, across or down the page, in a band at most ``max_thickness`` thick (a glyph's
    strokes are shorter; a dark block is thicker). Runs are found with moving averages, so the cost does
    not grow with the length.
    """
    a = np.asarray(flat)
    h, w = a.shape[0] // 2 * 2, a.shape[1] // 2 * 2
    # Found on a half-size copy that keeps each 2x2 block's darkest pixel (a 1-px rule survives), then
    # mapped back onto the page's own ink.
    half = np.minimum(np.minimum(a[0:h:2, 0:w:2], a[1:h:2, 0:w:2]), np.minimum(a[0:h:2, 1:w:2], a[1:h:2, 1:w:2]))
    ink = (half < 200).astype(np.float32)  # grey rules count: Tesseract sees them too
    length, band = max(2, min_length // 2), max(1, max_thickness // 2)
    found = np.zeros(ink.shape, bool)
    for axis in (1, 0):
        # Only rows (columns) holding at least a rule's length of ink can hold a rule: the rest are skipped.
        keep = np.flatnonzero(ink.sum(axis=axis) >= length)
        if ink.shape[axis] < length or not len(keep):
            continue
        part = np.take(ink, keep, axis=1 - axis)
        full = ndimage.uniform_filter1d(part, length, axis=axis, mode="constant") > 0.999
        run = np.zeros(ink.shape, bool)
        if axis == 1:
            run[keep] = ndimage.maximum_filter1d(full, length, axis=axis) & (part > 0)
        else:
            run[:, keep] = ndimage.maximum_filter1d(full, length, axis=axis) & (part > 0)
        across = 1 - axis  # a band thicker than max_thickness is not a rule
        thick = ndimage.uniform_filter1d(run.astype(np.float32), band + 1, axis=across) > 0.999
        found |= run & ~ndimage.maximum_filter1d(thick, band + 1, axis=across)
    length_px = 2 * int(found.sum())
    found = ndimage.maximum_filter(found, 3)  # a pixel's margin: anti-aliased edges go with the rule
    out = np.zeros(a.shape, bool)
    out[:h, :w] = np.repeat(np.repeat(found, 2, axis=0), 2, axis=1)
    return out, length_px


def needs_lines(boxes: list[tuple[int, int, int, int]], options: Enhance) -> bool:
    """Whether line heights are uneven or outside the range Tesseract reads well."""
    if not boxes:
        return False
    heights = sorted(b[3] - b[1] for b in boxes)
    median = heights[len(heights) // 2]
    return (median < options.min_line or median > options.max_line
            or heights[-1] > options.max_line_ratio * median)


def stack_lines(flat: Image.Image, boxes: list[tuple[int, int, int, int]],
                target: int) -> tuple[Image.Image, list[Strip]]:
    """Every line scaled to ``target`` pixels high, stacked top to bottom on white."""
    w, h = flat.size
    pieces = []
    for left, top, right, bottom in boxes:
        src = (max(0, left - 4), max(0, top - 2), min(w, right + 4), min(h, bottom + 2))
        scale = min(max(target / (bottom - top), 0.25), 3.0)
        crop = flat.crop(src)
        size = (max(1, round(crop.width * scale)), max(1, round(crop.height * scale)))
        pieces.append((src, scale, crop.resize(size, Image.Resampling.LANCZOS)))
    gap, margin = int(target * 0.7), target
    out = Image.new("L", (max(p[2].width for p in pieces) + 2 * margin,
                          sum(p[2].height for p in pieces) + gap * (len(pieces) - 1) + 2 * margin), 255)
    strips, y = [], margin
    for src, scale, piece in pieces:
        out.paste(piece, (margin, y))
        strips.append(Strip(src, (margin, y), scale))
        y += piece.height + gap
    return out, strips


def prepare(gray: Image.Image, options: Enhance) -> Prepared:
    """The image Tesseract should read for this page, with the steps that were applied."""
    steps: list[str] = []
    image = gray
    flat_page, measures = None, None
    if options.flatten:
        flat = measures = flatten(gray)
        image = flat_page = flat.image
        steps.append("flatten")
        if flat.inverted:
            steps.append("inverted")
    skew = 0.0
    if options.deskew:
        skew = estimate_skew(image, options.max_skew_deg)
        if abs(skew) >= 0.3:
            fill = 255 if options.flatten else int(np.median(np.asarray(image)))
            image = image.rotate(skew, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=fill)
            steps.append("deskew")
        else:
            skew = 0.0
    if options.rules and options.flatten:
        found, length = rules(image, max(options.min_rule, image.width // 8))
        if length >= options.min_rule_share * image.width:
            # Tesseract reads ruled tables as noise: the rules are erased.
            a = np.asarray(image).copy()
            a[found] = 255
            image = Image.fromarray(a)
            steps.append("rules")
    prepared = Prepared(image=image, page_size=image.size, skew=skew, steps=steps, flat=flat_page,
                        source_size=gray.size, measures=measures)
    if options.lines and options.flatten:
        boxes = text_lines(image)
        if needs_lines(boxes, options):
            prepared.image, prepared.strips = stack_lines(image, boxes, options.line_height)
            steps.append("lines")
    return prepared


def as_is(upload: Image.Image, prepared: Prepared, options: Enhance) -> Prepared | None:
    """The upload as Tesseract reads it untouched, for a page where that may read better; else None.

    Flattening loses a little on some clean pages (anti-aliased strokes, JPEG noise stretched into
    ink) and gains a lot on others, so a page that needed no inversion (where Tesseract alone fails:
    light text) is read both ways and the better reading is kept. Line-normalised pages are compared
    too since issue 67 (on the tuning split that lowered receipts, paragraphs, forms and screenshots).
    ``upload`` is scaled to the size of ``prepared.flat`` (the bounded page), so the two readings' boxes
    and the ink they are judged against line up.
    """
    if prepared.flat is None or not options.compare_as_uploaded or "inverted" in prepared.steps:
        return None
    upload = as_uploaded(upload, prepared.flat.size)
    return Prepared(image=upload, page_size=upload.size, steps=["as_is"], flat=prepared.flat)


def bounded_size(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """The size :func:`services.ocr.imaging.to_gray` bounds an image of ``size`` to (never upscaled)."""
    long_side = max(size)
    if long_side <= max_side:
        return size
    ratio = max_side / long_side
    return max(1, round(size[0] * ratio)), max(1, round(size[1] * ratio))


def as_uploaded(upload: Image.Image, size: tuple[int, int]) -> Image.Image:
    """The upload as Tesseract reads it untouched, at ``size`` (transparency composited on white)."""
    if upload.mode not in ("RGB", "L"):  # transparency and palettes: composited on white, as for the page
        upload = to_gray(upload, max(upload.size))
    if upload.size != size:
        upload = upload.resize(size, Image.Resampling.LANCZOS)
    return upload
