"""Résumé pages with pictures: ID photos and faces that must be masked, logos, charts and signatures that must not.

Each page is a page of :mod:`bench.masking_set` (the same text, personal data and ink boxes) under a
header band: the title "이 력 서" on the left and, on the right (or the left), one picture —

- ``photo``: an ID photo, 3:4, 140-240 px wide at 150 dpi, cut from a picture a package ships
  (matplotlib's sample data: the portrait ``grace_hopper.jpg``; a terrain model and a relief
  rendered as a shaded picture) or a drawn portrait (a shaded face, hair and shoulders on a graded
  background), with a thin frame or none;
- ``logo``: a company mark (matplotlib's ``logo2.png``, or a drawn mark: a solid shape and letters);
- ``chart``: a skills chart (bars or a line, drawn by matplotlib);
- ``signature``: a handwritten-looking stroke beside "서명" in a band at the foot of the page;
- ``none``: no picture.

Then the page is scanned in one of bench/masking_set.py's six conditions (the picture turns and
blurs with the text). Each page records its pictures' boxes and kinds. Deterministic per seed:
``tune`` 21, ``report`` 22 — the detector's thresholds are chosen on ``tune`` only.
"""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from bench.masking_set import CONDITIONS, FONTS, Entity, MaskingSample, drawn, scanned
from bench.ocr_set import FONT_DIR
from bench.pii_set import page as pii_page

SEEDS = {"tune": 21, "report": 22, "fresh": 23}
KINDS = ("photo", "photo", "photo", "logo", "chart", "signature", "none")  # photos are half the pages
MASKED_KINDS = ("photo",)  # what must be masked; the other pictures must not be
Box = tuple[int, int, int, int]
BAND = 330  # the header band's height


@dataclass(frozen=True)
class Picture:
    """One picture on the page: its kind and its box in the image's pixels."""

    kind: str
    source: str
    box: Box


@dataclass
class PictureSample(MaskingSample):
    """A masking_set page (its text not kept) with its pictures."""

    pictures: list[Picture] = field(default_factory=list)


def _sample_data(name: str):
    from matplotlib import cbook

    return cbook.get_sample_data(name)


def _shaded(height: np.ndarray) -> Image.Image:
    """An elevation grid as a shaded relief picture (matplotlib's LightSource)."""
    from matplotlib import colormaps
    from matplotlib.colors import LightSource

    rgb = LightSource(azdeg=315, altdeg=45).shade(height, cmap=colormaps["gist_earth"], blend_mode="soft")
    return Image.fromarray((rgb[..., :3] * 255).astype(np.uint8))


def _portrait(rng: random.Random, size: tuple[int, int]) -> Image.Image:
    """A drawn portrait: graded background, shoulders, a shaded face, hair, eyes and mouth."""
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    top = np.array([rng.randint(150, 230), rng.randint(170, 230), rng.randint(190, 250)], np.float32)
    a = top * (1 - 0.35 * yy[..., None] / h)
    skin = np.array([rng.randint(200, 240), rng.randint(160, 200), rng.randint(130, 170)], np.float32)
    cx, cy, rx, ry = w / 2, h * 0.42, w * 0.26, h * 0.25
    d = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2
    shade = np.clip(1.05 - 0.35 * (xx - cx + rx) / (2 * rx), 0.6, 1.05)[..., None]
    a = np.where((d <= 1)[..., None], skin * shade, a)
    coat = np.array([rng.randint(20, 70)] * 3, np.float32)
    a = np.where(((yy > h * 0.72) & (np.abs(xx - cx) < w * (0.2 + 0.5 * (yy - h * 0.72) / h)))[..., None], coat, a)
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    hair = tuple(rng.randint(10, 60) for _ in range(3))
    draw.chord((cx - rx * 1.1, cy - ry * 1.15, cx + rx * 1.1, cy + ry * 0.3), 180, 360, fill=hair)
    for ex in (cx - rx * 0.4, cx + rx * 0.4):
        draw.ellipse((ex - w * 0.03, cy - h * 0.02, ex + w * 0.03, cy + h * 0.015), fill=(30, 25, 25))
    draw.arc((cx - rx * 0.35, cy + ry * 0.25, cx + rx * 0.35, cy + ry * 0.6), 20, 160, fill=(140, 60, 60), width=2)
    noise = np.random.default_rng(rng.randrange(1 << 30)).normal(0, 6, (h, w, 3))
    return Image.fromarray(np.clip(np.asarray(img, np.float32) + noise, 0, 255).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(1.2))


def photo(rng: random.Random, width: int) -> tuple[Image.Image, str]:
    """An ID photo ``width`` wide (3:4) and where it came from."""
    size = (width, width * 4 // 3)
    source = rng.choice(["grace_hopper", "grace_hopper", "terrain", "relief", "drawn", "drawn"])
    if source == "grace_hopper":
        src = Image.open(_sample_data("grace_hopper.jpg")).convert("RGB")
        cw = rng.randint(300, 480)
        left, top = rng.randint(0, src.width - cw), rng.randint(0, max(0, src.height - cw * 4 // 3))
        pic = src.crop((left, top, left + cw, min(src.height, top + cw * 4 // 3)))
    elif source == "terrain":
        pic = _shaded(np.asarray(_sample_data("topobathy.npz")["topo"], np.float64))
    elif source == "relief":
        pic = _shaded(np.asarray(_sample_data("jacksboro_fault_dem.npz")["elevation"], np.float64))
    else:
        return _portrait(rng, size), source
    return pic.resize(size, Image.Resampling.LANCZOS), source


def logo(rng: random.Random) -> tuple[Image.Image, str]:
    """A company mark: matplotlib's logo, or a solid shape with letters."""
    if rng.random() < 0.4:
        src = Image.open(_sample_data("logo2.png")).convert("RGBA")
        w = rng.randint(220, 320)
        src = src.resize((w, w * src.height // src.width), Image.Resampling.LANCZOS)
        out = Image.new("RGB", src.size, (255, 255, 255))
        out.paste(src, mask=src.split()[3])
        return out, "logo2"
    w, h = rng.randint(180, 280), rng.randint(70, 110)
    out = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(out)
    colour = tuple(rng.randint(0, 200) for _ in range(3))
    if rng.random() < 0.5:
        draw.ellipse((4, 4, h - 4, h - 4), fill=colour)
    else:
        draw.rounded_rectangle((4, 4, h - 4, h - 4), radius=12, fill=colour)
    font = ImageFont.truetype(str(FONT_DIR / "NanumSquareR.ttf"), h // 3)
    draw.text((h + 8, h // 3), rng.choice(["한결소프트", "바른물류", "NOTEFLOW", "온기상점"]), font=font, fill=colour)
    return out, "drawn_logo"


def chart(rng: random.Random) -> tuple[Image.Image, str]:
    """A skills chart drawn by matplotlib: bars or a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(rng.uniform(2.6, 3.6), rng.uniform(1.8, 2.4)), dpi=90)
    labels = ["Java", "Python", "SQL", "AWS", "Git"][:rng.randint(3, 5)]
    values = [rng.randint(2, 10) for _ in labels]
    kind = rng.choice(["bars", "line"])
    if kind == "bars":
        ax.bar(labels, values, color=rng.choice(["tab:blue", "tab:orange", "tab:green", "0.4"]))
    else:
        ax.plot(labels, values, marker="o")
    ax.set_ylim(0, 10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB"), f"chart_{kind}"


def signature(rng: random.Random) -> tuple[Image.Image, str]:
    """A handwritten-looking stroke: a few joined loops with varying pen width."""
    w, h = rng.randint(200, 300), rng.randint(70, 100)
    out = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(out)
    pts = []
    loops = rng.randint(3, 6)
    for k in range(120):
        t = k / 119
        x = 10 + t * (w - 20)
        y = h / 2 + math.sin(t * loops * 2 * math.pi) * h * 0.3 * (1 - 0.5 * t) + math.sin(t * 17) * 4
        pts.append((x, y))
    draw.line(pts, fill=(20, 20, 60), width=rng.randint(2, 4), joint="curve")
    return out, "signature"


def sample(i: int, condition: str, kind: str, rng: random.Random) -> PictureSample:
    """Page ``i``: a masking_set page under a header band holding a picture of ``kind``, then scanned."""
    text, gold = pii_page(rng)
    body, entities = drawn(text, gold, condition, rng)
    paper = body.getpixel((5, 5))
    foot = 140 if kind == "signature" else 0
    page = Image.new("RGB", (body.width, body.height + BAND + foot), paper)
    page.paste(body, (0, BAND))
    entities = [Entity(e.kind, e.text, (e.box[0], e.box[1] + BAND, e.box[2], e.box[3])) for e in entities]
    draw = ImageDraw.Draw(page)
    ink = body.getpixel((5, 5))
    ink = tuple(max(0, c - 200) for c in ink) if isinstance(ink, tuple) else 20
    title = ImageFont.truetype(str(FONT_DIR / rng.choice(FONTS)), 56)
    pictures: list[Picture] = []
    if kind == "signature":
        pic, source = signature(rng)
        y = body.height + BAND + 20
        draw.text((body.width - pic.width - 190, y + 25), "서명", font=title, fill=ink)
        x = body.width - pic.width - 70
        page.paste(pic, (x, y))
        pictures.append(Picture(kind, source, (x, y, pic.width, pic.height)))
    if kind in ("photo", "logo", "chart"):
        pic, source = (photo(rng, rng.randint(140, 240)) if kind == "photo" else logo(rng) if kind == "logo"
                       else chart(rng))
        right = rng.random() < 0.8
        x = body.width - pic.width - rng.randint(60, 90) if right else rng.randint(60, 90)
        y = rng.randint(20, max(21, BAND - pic.height - 10))
        if kind == "photo" and rng.random() < 0.5:
            ImageDraw.Draw(pic).rectangle((0, 0, pic.width - 1, pic.height - 1), outline=(60, 60, 60), width=2)
        page.paste(pic, (x, y))
        pictures.append(Picture(kind, source, (x, y, pic.width, pic.height)))
        draw.text((body.width - 480 if not right else 70, 110), "이 력 서", font=title, fill=ink)
    else:
        draw.text((70, 110), "이 력 서", font=title, fill=ink)
    # Scanned with the text: the pictures ride along as entities, so a turned page turns their boxes too.
    marked = entities + [Entity(f"picture:{p.kind}", p.source, p.box) for p in pictures]
    page, marked = scanned(page, marked, condition, rng)
    entities = [e for e in marked if not e.kind.startswith("picture:")]
    pictures = [Picture(e.kind.split(":", 1)[1], e.text, e.box) for e in marked if e.kind.startswith("picture:")]
    return PictureSample(f"{condition}-{kind}-{i:02d}", condition, page, "", entities, pictures)


def build(split: str = "tune", per_condition: int = 7,
          conditions: tuple[str, ...] = CONDITIONS) -> list[PictureSample]:
    """``per_condition`` pages under each condition, the kinds in turn, from the split's own seed."""
    rng = random.Random(SEEDS[split])
    return [sample(i, condition, KINDS[i % len(KINDS)], rng) for condition in conditions
            for i in range(per_condition)]
