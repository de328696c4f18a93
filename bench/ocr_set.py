"""A generated Korean OCR page set with a tuning split, a report split and a fresh split.

Ten categories, the ones a new user sends: first ``cover`` (display-font titles on gradients, light-on-dark
bands, light titles on mid-tone backgrounds), ``receipt`` (narrow thermal slips, faded ink),
``paragraph`` (clean body text, 20-40 px), ``rotated`` (2-10 degrees either way), ``photo``
(uneven light, blur, sensor noise, JPEG) and ``low_contrast`` (grey on grey, sometimes light text
on dark paper); and since issue 67 ``thermal`` (thermal-print slips: coarse dots, worn-head streaks),
``phone`` (a page photographed on a table, in perspective, under a hand's shadow), ``screenshot`` (app
screens, light and dark) and ``form`` (ruled tables of labels and values). Deterministic (seeded),
rendered with Debian's Nanum fonts (``fonts-nanum``); all text (bench/data/ocr_texts.json) was
written for this project.

The splits share no text: even-numbered sentences, titles, shops and items belong to ``tune``,
odd-numbered ones to ``report``, and each split has its own random seed (sizes, fonts, colours,
degradations). Parameters are chosen on ``tune``; figures were reported on ``report``, and since
issue 67's last change on ``fresh`` (the report texts, a seed drawn after that change).
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIR = Path("/usr/share/fonts/truetype/nanum")
BODY_FONTS = ["NanumGothic.ttf", "NanumMyeongjo.ttf", "NanumBarunGothic.ttf", "NanumSquareR.ttf",
              "NanumSquareRoundR.ttf"]
DISPLAY_FONTS = ["NanumSquareRoundB.ttf", "NanumMyeongjoBold.ttf", "NanumGothicBold.ttf", "NanumSquareB.ttf",
                 "NanumBarunGothicBold.ttf"]
RECEIPT_FONTS = ["NanumGothicCoding.ttf", "NanumGothicCodingBold.ttf", "NanumGothic.ttf", "NanumBarunGothic.ttf"]

_TEXTS = json.loads((Path(__file__).resolve().parent / "data" / "ocr_texts.json").read_text(encoding="utf-8"))
SENTENCES, SURNAMES, GIVEN, ROLES = _TEXTS["sentences"], _TEXTS["surnames"], _TEXTS["given"], _TEXTS["roles"]
TITLES = [tuple(t) for t in _TEXTS["titles"]]
PUBLISHERS, SHOPS, ITEMS = _TEXTS["publishers"], _TEXTS["shops"], _TEXTS["items"]
CATEGORIES = ["cover", "receipt", "paragraph", "rotated", "photo", "low_contrast", "thermal", "phone", "screenshot",
              "form"]
SPLITS = {"tune": 0, "report": 1, "fresh": 1}  # fresh: the report texts on pages drawn after issue 67's last change
SEEDS = {"tune": 1401, "report": 2402, "fresh": 3403}


@dataclass
class Sample:
    """One image and its ground truth (lines joined by newlines)."""

    name: str
    category: str
    image: Image.Image
    truth: str

    def png(self) -> bytes:
        """The image as PNG bytes (what a caller uploads)."""
        buf = io.BytesIO()
        self.image.save(buf, format="PNG")
        return buf.getvalue()


def _font(name: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT_DIR / name), size)


def _own(items: list, split: str) -> list:
    """The split's share of a text pool: even entries for tune, odd for report."""
    return items[SPLITS[split]::2]


def render_lines(lines: list[str], font: ImageFont.FreeTypeFont, *, margin: int = 40, spacing: float = 1.6,
                 fg: tuple[int, int, int] = (20, 20, 20), bg: tuple[int, int, int] = (255, 255, 255),
                 width: int | None = None) -> Image.Image:
    """Lines of text on a plain background."""
    size = font.size
    text_w = max(int(font.getlength(line)) for line in lines)
    w = width or text_w + 2 * margin
    h = int(len(lines) * size * spacing) + 2 * margin
    img = Image.new("RGB", (w, h), bg)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((margin, margin + int(i * size * spacing)), line, font=font, fill=fg)
    return img


def _body(rng: random.Random, split: str, n_min: int = 4, n_max: int = 7) -> list[str]:
    pool = _own(SENTENCES, split)
    start = rng.randrange(len(pool))
    per_line = rng.choice([1, 1, 2])  # short lines, or page-wide ones of two sentences
    n = rng.randint(n_min, n_max)
    return [" ".join(pool[(start + k * per_line + j) % len(pool)] for j in range(per_line)) for k in range(n)]


def _paper(rng: random.Random) -> tuple[int, int, int]:
    return rng.choice([(255, 255, 255), (250, 248, 240), (246, 244, 236), (252, 250, 245)])


def paragraph(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A multi-line paragraph in a body font, 20-40 px."""
    lines = _body(rng, split)
    font = _font(rng.choice(BODY_FONTS), rng.choice([20, 24, 28, 32, 36, 40]))
    ink = rng.randint(0, 50)
    img = render_lines(lines, font, margin=rng.randint(30, 80), spacing=rng.uniform(1.4, 1.9),
                       fg=(ink, ink, ink), bg=_paper(rng))
    return img, "\n".join(lines)


def _gradient(w: int, h: int, c1, c2, diagonal: bool) -> Image.Image:
    y = np.linspace(0.0, 1.0, h)[:, None]
    x = np.linspace(0.0, 1.0, w)[None, :]
    t = (0.6 * y + 0.4 * x) if diagonal else (y + 0 * x)
    a = np.asarray(c1, np.float32)[None, None, :] * (1 - t[..., None]) + np.asarray(c2, np.float32) * t[..., None]
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _wrap_title(title: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    if font.getlength(title) <= width or " " not in title:
        return [title]
    words = title.split(" ")
    cut = max(range(1, len(words)), key=lambda k: -abs(font.getlength(" ".join(words[:k])) - width / 2))
    return [" ".join(words[:cut]), " ".join(words[cut:])]


def cover(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A book cover: a large display title, a subtitle, the author and the publisher."""
    title, subtitle = rng.choice(_own(TITLES, split))
    author = f"{rng.choice(SURNAMES)}{rng.choice(GIVEN)} {rng.choice(ROLES)}"
    publisher = rng.choice(PUBLISHERS)
    w = rng.choice([560, 600, 640, 720])
    h = int(w * rng.uniform(1.4, 1.55))
    style = ["dark_on_light", "light_on_dark", "band", "light_on_mid"][i % 4]
    light = (rng.randint(225, 250), rng.randint(215, 245), rng.randint(200, 240))
    light2 = (rng.randint(180, 230), rng.randint(190, 235), rng.randint(200, 245))
    dark = (rng.randint(20, 70), rng.randint(25, 80), rng.randint(40, 110))
    dark2 = (rng.randint(60, 120), rng.randint(40, 100), rng.randint(70, 140))
    mid = (rng.randint(90, 150), rng.randint(120, 170), rng.randint(150, 200))
    mid2 = (rng.randint(150, 200), rng.randint(120, 180), rng.randint(100, 160))
    cream = (rng.randint(240, 255), rng.randint(235, 250), rng.randint(220, 240))
    ink = (rng.randint(15, 45), rng.randint(15, 45), rng.randint(25, 60))
    diagonal = rng.random() < 0.5
    if style == "dark_on_light":
        img, title_ink, text_ink = _gradient(w, h, light, light2, diagonal), ink, ink
    elif style == "light_on_dark":
        img, title_ink, text_ink = _gradient(w, h, dark, dark2, diagonal), cream, (220, 220, 215)
    elif style == "light_on_mid":
        img, title_ink, text_ink = _gradient(w, h, mid, mid2, diagonal), cream, ink
    else:
        img, title_ink, text_ink = _gradient(w, h, light, light2, diagonal), cream, ink
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(0, 3)):  # decoration: soft discs in a tone near the background
        r = rng.randint(30, 110)
        cx, cy = rng.randint(0, w), rng.choice([rng.randint(0, h // 5), rng.randint(4 * h // 5, h)])
        base: tuple[int, ...] = img.getpixel((min(w - 1, cx), min(h - 1, cy)))  # type: ignore[assignment]
        tone = tuple(max(0, min(255, c + rng.randint(-35, 35))) for c in base)
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=tone)
    tfont = _font(rng.choice(DISPLAY_FONTS), rng.choice([56, 64, 72, 84, 96]))
    title_lines = _wrap_title(title, tfont, int(w * 0.82))
    while max(tfont.getlength(t) for t in title_lines) > w * 0.9:
        tfont = _font(tfont.path, tfont.size - 6)  # type: ignore[arg-type]
    top = int(h * rng.uniform(0.2, 0.32))
    line_h = int(tfont.size * 1.3)
    if style == "band":
        band = (rng.randint(20, 90), rng.randint(30, 90), rng.randint(50, 120))
        draw.rectangle((0, top - 30, w, top + line_h * len(title_lines) + 20), fill=band)
    for k, t in enumerate(title_lines):
        draw.text(((w - tfont.getlength(t)) / 2, top + k * line_h), t, font=tfont, fill=title_ink)
    sfont = _font(rng.choice(BODY_FONTS), rng.choice([26, 30, 34]))
    sub_y = top + line_h * len(title_lines) + int(h * 0.06)
    draw.text(((w - sfont.getlength(subtitle)) / 2, sub_y), subtitle, font=sfont, fill=text_ink)
    afont = _font(rng.choice(BODY_FONTS), rng.choice([26, 30]))
    draw.text(((w - afont.getlength(author)) / 2, int(h * 0.74)), author, font=afont, fill=text_ink)
    pfont = _font(rng.choice(DISPLAY_FONTS), rng.choice([22, 26]))
    draw.text(((w - pfont.getlength(publisher)) / 2, int(h * 0.88)), publisher, font=pfont, fill=text_ink)
    return img, "\n".join([*title_lines, subtitle, author, publisher])


def receipt(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A narrow receipt: shop, date, items with prices, a total, the payment; sometimes faded."""
    shop = rng.choice(_own(SHOPS, split))
    names = rng.sample(_own(ITEMS, split), rng.randint(3, 5))
    prices = [rng.randrange(1000, 30000, 100) for _ in names]
    date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}"
    lines = [shop, date] + [f"{n}  {p:,}원" for n, p in zip(names, prices, strict=True)] + [
        f"합계  {sum(prices):,}원", rng.choice(["카드 결제", "현금 결제", "간편 결제"])]
    font = _font(rng.choice(RECEIPT_FONTS), rng.choice([22, 24, 26, 28]))
    ink = rng.choice([20, 40, 70, 100])
    paper = rng.choice([(250, 250, 246), (244, 242, 236), (238, 238, 232)])
    img = render_lines(lines, font, margin=rng.randint(20, 40), spacing=rng.uniform(1.35, 1.6),
                       fg=(ink, ink, ink), bg=paper)
    seed = rng.randrange(1 << 30)
    a = np.asarray(img, np.float32) + np.random.default_rng(seed).normal(0, 4, (img.height, img.width, 1))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), "\n".join(lines)


def rotated(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A paragraph scanned askew (2-10 degrees either way)."""
    img, truth = paragraph(i, rng, split)
    angle = rng.choice([-1, 1]) * rng.uniform(2, 10)
    return img.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True,
                      fillcolor=img.getpixel((0, 0))), truth


def _jpeg(img: Image.Image, quality: int) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def photo(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A paragraph photographed: slight tilt, uneven light, blur, sensor noise, JPEG."""
    img, truth = paragraph(i, rng, split)
    img = img.rotate(rng.uniform(-1.5, 1.5), resample=Image.Resampling.BICUBIC, expand=True,
                     fillcolor=img.getpixel((0, 0)))
    a = np.asarray(img, np.float32)
    h, w = a.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = rng.uniform(0, w), rng.uniform(0, h)
    light = 1.0 - rng.uniform(0.15, 0.4) * np.hypot(xx - cx, yy - cy) / np.hypot(w, h)
    a = a * light[..., None] * rng.uniform(0.8, 0.95)
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.4)))
    seed = rng.randrange(1 << 30)
    a = np.asarray(img, np.float32) + np.random.default_rng(seed).normal(0, rng.uniform(4, 10), a.shape)
    return _jpeg(Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), rng.randint(35, 70)), truth


def low_contrast(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """Grey text on grey or tinted paper (every third page light text on dark paper), mild noise."""
    lines = _body(rng, split, 3, 6)
    font = _font(rng.choice(BODY_FONTS), rng.choice([22, 26, 30, 34]))
    if i % 3 == 2:
        bg = rng.randint(50, 90)
        fg = bg + rng.randint(50, 80)
    else:
        bg = rng.randint(170, 225)
        fg = bg - rng.randint(50, 80)
    tint = rng.choice([(0, 0, 0), (8, 4, -6), (-6, 0, 8)])
    img = render_lines(lines, font, margin=rng.randint(30, 60), spacing=rng.uniform(1.4, 1.8),
                       fg=tuple(fg + t for t in tint), bg=tuple(bg + t for t in tint))  # type: ignore[arg-type]
    seed = rng.randrange(1 << 30)
    noise = np.random.default_rng(seed).normal(0, rng.uniform(2, 6), (img.height, img.width, 1))
    a = np.asarray(img, np.float32) + noise
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), "\n".join(lines)


def thermal(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A thermal-print slip: coarse dots (drawn small, enlarged), faded head streaks, dashed rules, cool paper."""
    shop = rng.choice(_own(SHOPS, split))
    names = rng.sample(_own(ITEMS, split), rng.randint(3, 6))
    qty = [rng.randint(1, 3) for _ in names]
    prices = [rng.randrange(900, 25000, 100) for _ in names]
    day = f"2025/{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}"
    lines = [shop, f"사업자 {rng.randint(100, 999)}-{rng.randint(10, 99)}-{rng.randint(10000, 99999)}",
             f"{day} {rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}"]
    lines += [f"{n} {q}개 {q * p:,}" for n, q, p in zip(names, qty, prices, strict=True)]
    lines += [f"합계 {sum(q * p for q, p in zip(qty, prices, strict=True)):,}원",
              f"승인번호 {rng.randint(10000000, 99999999)}"]
    scale = rng.choice([1.5, 2.0])
    font = _font(rng.choice(RECEIPT_FONTS[:2]), rng.choice([14, 16]))
    small = render_lines(lines, font, margin=14, spacing=1.5, fg=(0, 0, 0), bg=(255, 255, 255))
    draw = ImageDraw.Draw(small)
    for k in (3, len(lines) - 2):  # dashed rules above the items and above the total
        y = 14 + int((1.5 * k - 0.3) * font.size)
        for x in range(10, small.width - 10, 8):
            draw.line((x, y, x + 4, y), fill=(0, 0, 0))
    big = small.resize((int(small.width * scale), int(small.height * scale)), Image.Resampling.NEAREST)
    ink = 1.0 - np.asarray(big.convert("L"), np.float32) / 255.0
    cols = np.ones(big.width, np.float32)
    for _ in range(rng.randint(1, 4)):  # a worn print head: lighter vertical streaks
        c, half = rng.randrange(big.width), rng.randint(3, 25)
        cols[max(0, c - half):c + half] = rng.uniform(0.35, 0.7)
    darkness = rng.uniform(0.55, 0.9) * cols[None, :] * np.linspace(1.0, rng.uniform(0.7, 1.0), big.height)[:, None]
    paper = np.asarray(rng.choice([(244, 246, 248), (238, 240, 241), (248, 247, 243)]), np.float32)
    a = paper[None, None, :] * (1 - (ink * darkness)[..., None])
    a += np.random.default_rng(rng.randrange(1 << 30)).normal(0, 3, (big.height, big.width, 1))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), "\n".join(lines)


def _perspective(img: Image.Image, corners: list[tuple[float, float]], size: tuple[int, int],
                 fill: tuple[int, int, int]) -> Image.Image:
    """``img`` warped so that its corners (tl, tr, br, bl) land on ``corners`` of a ``size`` canvas."""
    w, h = img.size
    src = [(0, 0), (w, 0), (w, h), (0, h)]
    rows, rhs = [], []
    for (x, y), (u, v) in zip(corners, src, strict=True):  # output (x, y) -> input (u, v)
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    coeffs = np.linalg.solve(np.asarray(rows, float), np.asarray(rhs, float))
    mask = Image.new("L", img.size, 255).transform(size, Image.Transform.PERSPECTIVE, tuple(coeffs),
                                                   Image.Resampling.BICUBIC)
    warped = img.transform(size, Image.Transform.PERSPECTIVE, tuple(coeffs), Image.Resampling.BICUBIC)
    return Image.composite(warped, Image.new("RGB", size, fill), mask)


def phone(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A page photographed by phone: on a table, in perspective, a hand's soft shadow across it, JPEG."""
    img, truth = (paragraph if i % 2 == 0 else receipt)(i, rng, split)
    w, h = img.size
    pad = int(0.08 * max(w, h))
    size = (w + 2 * pad, h + 2 * pad)
    jitter = [(rng.uniform(-0.06, 0.06) * w, rng.uniform(-0.06, 0.06) * h) for _ in range(4)]
    corners = [(pad + x + dx, pad + y + dy) for (x, y), (dx, dy) in zip([(0, 0), (w, 0), (w, h), (0, h)], jitter,
                                                                         strict=True)]
    table = rng.choice([(96, 72, 52), (60, 62, 66), (150, 140, 125)])
    a = np.asarray(_perspective(img, corners, size, table), np.float32)
    yy, xx = np.mgrid[0:size[1], 0:size[0]]
    cx, cy = rng.choice([(0, 0), (size[0], 0), (0, size[1]), (size[0], size[1])])
    reach = rng.uniform(0.45, 0.75) * np.hypot(*size)
    edge = rng.uniform(0.05, 0.15) * np.hypot(*size)
    shadow = 1.0 - rng.uniform(0.3, 0.55) * np.clip((reach - np.hypot(xx - cx, yy - cy)) / edge, 0, 1)
    a = a * shadow[..., None] * rng.uniform(0.85, 1.0)
    a += np.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(3, 7), a.shape)
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 0.9)))
    return _jpeg(img, rng.randint(50, 80)), truth


def screenshot(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A phone app's screen: a coloured header, list rows with grey second lines, a button; light or dark mode."""
    dark = i % 3 == 2
    w = rng.choice([720, 1080])
    k = w / 720
    bg, fg, sub = ((18, 18, 20), (235, 235, 238), (150, 150, 158)) if dark else (
        (255, 255, 255), (25, 25, 30), (rng.randint(110, 140),) * 3)
    accent = rng.choice([(33, 110, 230), (0, 150, 110), (230, 90, 40), (120, 70, 200)])
    rows = rng.randint(3, 5)
    title_font = _font(rng.choice(DISPLAY_FONTS), int(34 * k))
    main_font, sub_font = _font(rng.choice(BODY_FONTS), int(28 * k)), _font(rng.choice(BODY_FONTS), int(22 * k))
    h = int((130 + rows * 120 + 170) * k)
    img = Image.new("RGB", (w, h), bg)
    draw = ImageDraw.Draw(img)
    screen = rng.choice(_own(_TEXTS["screens"], split))
    draw.rectangle((0, 0, w, int(100 * k)), fill=accent)
    draw.text((int(32 * k), int(30 * k)), screen, font=title_font, fill=(255, 255, 255))
    truth = [screen]
    items, statuses, pool = _own(ITEMS + SHOPS, split), _own(_TEXTS["statuses"], split), _own(SENTENCES, split)
    for r in range(rows):
        y = int((130 + r * 120) * k)
        head = f"{rng.choice(items)} · {rng.choice(statuses)}"
        second = rng.choice(pool)
        draw.text((int(32 * k), y), head, font=main_font, fill=fg)
        draw.text((int(32 * k), y + int(44 * k)), second, font=sub_font, fill=sub)
        draw.line((int(32 * k), y + int(100 * k), w, y + int(100 * k)), fill=sub if dark else (225, 225, 230))
        truth += [head, second]
    button = rng.choice(_own(_TEXTS["buttons"], split))
    top = h - int(130 * k)
    draw.rounded_rectangle((int(32 * k), top, w - int(32 * k), top + int(88 * k)), radius=int(16 * k), fill=accent)
    draw.text(((w - main_font.getlength(button)) / 2, top + int(26 * k)), button, font=main_font, fill=(255, 255, 255))
    return img, "\n".join([*truth, button])


def form(i: int, rng: random.Random, split: str) -> tuple[Image.Image, str]:
    """A filled-in form: a title, then a ruled table of labels (often on grey) and typed values."""
    name = f"{rng.choice(SURNAMES)}{rng.choice(GIVEN)}"
    born = f"{rng.randint(1970, 2004)}년 {rng.randint(1, 12)}월 {rng.randint(1, 28)}일"
    fields = [("성명", name), ("생년월일", born),
              ("연락처", f"010-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"),
              ("소속", rng.choice(_own(_TEXTS["departments"], split))),
              ("주소", rng.choice(_own(_TEXTS["places"], split))),
              ("신청일", f"2025. {rng.randint(1, 12)}. {rng.randint(1, 28)}."),
              ("사유", rng.choice(_own(SENTENCES, split)))]
    fields = fields[:2] + rng.sample(fields[2:], rng.randint(2, 5))
    title = rng.choice(_own(_TEXTS["forms"], split))
    font = _font(rng.choice(BODY_FONTS), rng.choice([22, 24, 26, 28]))
    tfont = _font(rng.choice(DISPLAY_FONTS), rng.choice([36, 40, 44]))
    label_w = int(font.size * 5)
    w = int(max(label_w + max(font.getlength(v) for _, v in fields) + 2 * font.size + 80, 640))
    row_h = int(font.size * rng.uniform(2.0, 2.6))
    top = 60 + int(tfont.size * 1.8)
    h = top + row_h * len(fields) + 60
    img = Image.new("RGB", (w, h), _paper(rng))
    draw = ImageDraw.Draw(img)
    draw.text(((w - tfont.getlength(title)) / 2, 50), title, font=tfont, fill=(20, 20, 20))
    shade = rng.choice([None, (228, 228, 228), (215, 222, 232)])
    line = rng.choice([(0, 0, 0), (90, 90, 90), (140, 140, 140)])
    for r, (label, value) in enumerate(fields):
        y = top + r * row_h
        if shade:
            draw.rectangle((40, y, 40 + label_w, y + row_h), fill=shade)
        draw.text((40 + font.size // 2, y + (row_h - font.size) // 2), label, font=font, fill=(30, 30, 30))
        draw.text((40 + label_w + font.size // 2, y + (row_h - font.size) // 2), value, font=font, fill=(10, 10, 40))
    width = rng.choice([1, 2])
    for r in range(len(fields) + 1):
        draw.line((40, top + r * row_h, w - 40, top + r * row_h), fill=line, width=width)
    for x in (40, 40 + label_w, w - 40):
        draw.line((x, top, x, top + row_h * len(fields)), fill=line, width=width)
    return img, "\n".join([title, *(f"{label} {value}" for label, value in fields)])


MAKERS = {"cover": cover, "receipt": receipt, "paragraph": paragraph, "rotated": rotated,
          "photo": photo, "low_contrast": low_contrast, "thermal": thermal, "phone": phone,
          "screenshot": screenshot, "form": form}


def build_set(per_category: int = 6, split: str = "tune", seed: int | None = None) -> list[Sample]:
    """``per_category`` images of each category from one split (its own texts and seed)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {sorted(SPLITS)}")
    rng = random.Random(SEEDS[split] if seed is None else seed)
    return [Sample(f"{cat}-{i:02d}", cat, *MAKERS[cat](i, rng, split))
            for cat in CATEGORIES for i in range(per_category)]


def cer(truth: str, text: str) -> float:
    """Character error rate: edit distance over the truth's characters, whitespace ignored."""
    a = "".join(truth.split())
    b = "".join(text.split())
    if not a:
        return 0.0 if not b else 1.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1] / len(a)
