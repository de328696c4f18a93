"""Résumé-like page images with known personal data and its boxes (bench.masking's set).

The text of each page comes from :mod:`bench.pii_set` (four layouts: form, prose, header block,
table; every kind of personal data, look-alike distractors, OCR confusions in some numbers); it is
drawn with one of Debian's Nanum fonts (``fonts-nanum``) on a 1,240-pixel-wide page (A4 at 150 dpi),
wrapped at spaces but never inside a piece of personal data, and each piece's ink box is recorded.
Then one condition is applied, the ones a backend receives:

- ``clean``: a clean scan, body text 22-30 px;
- ``noise``: a grey scan with sensor noise and speckles;
- ``rotated``: scanned askew, 1.5-4 degrees either way;
- ``photo``: a photo of a printed page (tilt under 1.5 degrees, uneven light, blur, noise, JPEG);
- ``low_contrast``: grey text on tinted paper;
- ``small``: small print, 15-17 px.

Boxes follow the page: a turned page's boxes are the upright rectangles around the turned ones.
Deterministic per seed; the split is the seed (``tune`` 11, ``report`` 12, ``fresh`` 13): thresholds
are chosen on ``tune``, figures reported on ``report``; ``fresh`` was added after the last tuning of
issue 66 and read once.
"""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from bench.ocr_set import FONT_DIR
from bench.pii_set import page as pii_page

SEEDS = {"tune": 11, "report": 12, "fresh": 13}  # fresh: added 2026-12-06 after issue 66's tuning, read once
CONDITIONS = ("clean", "noise", "rotated", "photo", "low_contrast", "small")
FONTS = ["NanumGothic.ttf", "NanumBarunGothic.ttf", "NanumMyeongjo.ttf", "NanumSquareR.ttf"]
WIDTH = 1240
Box = tuple[int, int, int, int]  # left, top, width, height


@dataclass(frozen=True)
class Entity:
    """One piece of personal data on the page: its kind, text and ink box in the image's pixels."""

    kind: str
    text: str
    box: Box


@dataclass
class MaskingSample:
    """One page image, its condition and the personal data on it."""

    name: str
    condition: str
    image: Image.Image
    text: str
    entities: list[Entity] = field(default_factory=list)

    def png(self) -> bytes:
        """The image as uploaded: PNG, or JPEG for a photo of the page."""
        buf = io.BytesIO()
        if self.condition == "photo":
            self.image.convert("RGB").save(buf, format="JPEG", quality=80)
        else:
            self.image.save(buf, format="PNG")
        return buf.getvalue()


def _wrap(text: str, gold: list[tuple[str, int, int]], font: ImageFont.FreeTypeFont,
          width: int) -> list[tuple[int, str]]:
    """Visual lines ``(offset in text, line)``: source lines wrapped at spaces outside every gold span."""
    inside: set[int] = set()
    for _, start, end in gold:
        inside.update(range(start, end))
    out: list[tuple[int, str]] = []
    offset = 0
    for source in text.split("\n"):
        start = offset
        while source and font.getlength(source) > width:
            cut = -1
            for i, ch in enumerate(source):
                if ch == " " and start + i not in inside and font.getlength(source[:i]) <= width:
                    cut = i
            if cut <= 0:
                break
            out.append((start, source[:cut]))
            start += cut + 1
            source = source[cut + 1:]
        out.append((start, source))
        offset += len(text[offset:].split("\n", 1)[0]) + 1
    return out


def _turn(box: Box, angle: float, old: tuple[int, int], new: tuple[int, int]) -> Box:
    """Where ``box`` lands when the page is turned by PIL's ``rotate(angle, expand=True)``."""
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    x, y, w, h = box
    pts = [((px - old[0] / 2) * c + (py - old[1] / 2) * s + new[0] / 2,
            -(px - old[0] / 2) * s + (py - old[1] / 2) * c + new[1] / 2)
           for px, py in ((x, y), (x + w, y), (x, y + h), (x + w, y + h))]
    left, top = math.floor(min(p[0] for p in pts)), math.floor(min(p[1] for p in pts))
    return left, top, math.ceil(max(p[0] for p in pts)) - left, math.ceil(max(p[1] for p in pts)) - top


def render(text: str, gold: list[tuple[str, int, int]], font: ImageFont.FreeTypeFont, *, margin: int = 70,
           fg: tuple[int, int, int] = (20, 20, 20), bg: tuple[int, int, int] = (255, 255, 255),
           spacing: float = 1.7) -> tuple[Image.Image, list[Entity]]:
    """The page drawn, and each gold span's ink box."""
    lines = _wrap(text, gold, font, WIDTH - 2 * margin)
    step = int(font.size * spacing)
    img = Image.new("RGB", (WIDTH, max(2 * margin + step * len(lines), int(WIDTH * 1.2))), bg)
    draw = ImageDraw.Draw(img)
    entities = []
    for i, (start, line) in enumerate(lines):
        y = margin + i * step
        draw.text((margin, y), line, font=font, fill=fg)
        for kind, s, e in gold:
            if start <= s and e <= start + len(line):
                piece = text[s:e]
                x = margin + font.getlength(line[:s - start])
                left, top, right, bottom = draw.textbbox((x, y), piece, font=font)
                entities.append(Entity(kind, piece, (int(left), int(top), int(right - left), int(bottom - top))))
    return img, entities


def _noise(img: Image.Image, rng: random.Random, sigma: float) -> Image.Image:
    a = np.asarray(img, np.float64)
    a = a + np.random.default_rng(rng.randrange(1 << 30)).normal(0, sigma, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _rotate(img: Image.Image, entities: list[Entity], angle: float) -> tuple[Image.Image, list[Entity]]:
    turned = img.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=img.getpixel((0, 0)))
    return turned, [Entity(e.kind, e.text, _turn(e.box, angle, img.size, turned.size)) for e in entities]


def sample(i: int, condition: str, rng: random.Random) -> MaskingSample:
    """Page ``i`` of a split under ``condition``."""
    text, gold = pii_page(rng)
    img, entities = drawn(text, gold, condition, rng)
    img, entities = scanned(img, entities, condition, rng)
    return MaskingSample(f"{condition}-{i:02d}", condition, img, text, entities)


def drawn(text: str, gold: list[tuple[str, int, int]], condition: str,
          rng: random.Random) -> tuple[Image.Image, list[Entity]]:
    """The page drawn in the condition's font size and colours, before the scan."""
    size = rng.randint(15, 17) if condition == "small" else rng.randint(22, 30)
    font = ImageFont.truetype(str(FONT_DIR / rng.choice(FONTS)), size)
    fg, bg = (20, 20, 20), (255, 255, 255)
    if condition == "low_contrast":
        base = rng.randint(175, 220)
        tint = rng.choice([(0, 0, 0), (8, 4, -6), (-6, 0, 8)])
        bg = tuple(base + t for t in tint)  # type: ignore[assignment]
        fg = tuple(base - rng.randint(60, 85) + t for t in tint)  # type: ignore[assignment]
    return render(text, gold, font, fg=fg, bg=bg)


def scanned(img: Image.Image, entities: list[Entity], condition: str,
            rng: random.Random) -> tuple[Image.Image, list[Entity]]:
    """The drawn page as the condition's scan or photo makes it (boxes follow the page)."""
    if condition == "noise":
        img = _noise(img.convert("L").point(lambda v: v * 0.9 + 12), rng, rng.uniform(8, 14))
        a = np.asarray(img).copy()
        speck = np.random.default_rng(rng.randrange(1 << 30)).random(a.shape) < 0.002
        a[speck] = 40
        img = Image.fromarray(a)
    elif condition == "rotated":
        img, entities = _rotate(img, entities, rng.choice([-1, 1]) * rng.uniform(1.5, 4.0))
    elif condition == "photo":
        img, entities = _rotate(img, entities, rng.uniform(-1.5, 1.5))
        a = np.asarray(img, np.float32)
        h, w = a.shape[:2]
        yy, xx = np.mgrid[0:h, 0:w]
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        light = 1.0 - rng.uniform(0.15, 0.35) * np.hypot(xx - cx, yy - cy) / np.hypot(w, h)
        a = a * light[..., None] * rng.uniform(0.85, 0.95)
        blur = ImageFilter.GaussianBlur(rng.uniform(0.5, 1.0))
        img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).filter(blur)
        img = _noise(img, rng, rng.uniform(3, 7))
    elif condition == "low_contrast":
        img = _noise(img, rng, rng.uniform(2, 5))
    return img, entities


def build(split: str = "tune", per_condition: int = 6, conditions: tuple[str, ...] = CONDITIONS) -> list[MaskingSample]:
    """``per_condition`` pages under each condition, from the split's own seed."""
    rng = random.Random(SEEDS[split])
    return [sample(i, condition, rng) for condition in conditions for i in range(per_condition)]
