"""A generated Korean OCR image set: covers, receipts, paragraphs; rotated, blurred and noisy variants.

Deterministic (seeded), rendered with Debian's Nanum fonts (package ``fonts-nanum``); the text is the
project's own. Every image comes with its ground truth, so CER needs no external data.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_DIR = Path("/usr/share/fonts/truetype/nanum")
BODY_FONTS = ["NanumGothic.ttf", "NanumMyeongjo.ttf", "NanumBarunGothic.ttf", "NanumSquareR.ttf"]
DISPLAY_FONTS = ["NanumSquareRoundB.ttf", "NanumMyeongjoBold.ttf", "NanumGothicBold.ttf", "NanumSquareB.ttf"]

PARAGRAPHS = [
    ["비 오는 날에는 따뜻한 차 한 잔과", "함께 오래된 소설을 다시 읽는다.", "창밖의 빗소리가 문장 사이를 채운다."],
    ["신입 개발자 면접에서는 Python과", "HTTP 같은 네트워크 기초를 묻는다.", "답을 모르면 솔직하게 말하는 편이 낫다."],
    ["부모님 결혼기념일 선물로는 함께", "보낼 수 있는 시간을 선물하는 것이", "가장 기억에 남는다고 한다."],
    ["이 청소기는 무선이라 가볍고", "한 번 충전하면 사십 분 동안", "거실과 방을 모두 청소할 수 있다."],
    ["도서관은 오전 아홉 시에 문을 열고", "매주 월요일에는 쉰다.", "대출 기간은 이 주일이다."],
    ["검색 결과가 느리면 사용자는", "기다리지 않고 다른 app으로 떠난다.", "빠른 응답이 곧 좋은 경험이다."],
]
COVERS = [
    ("바다가 들려준 이야기", "김서연 지음"), ("오늘의 요리 수업", "박민준 엮음"),
    ("작은 가게의 큰 꿈", "이하늘 지음"), ("밤하늘 별자리 여행", "정우진 글"),
    ("한국어 문장 연습", "최지아 지음"), ("AI 시대의 글쓰기", "한도윤 지음"),
]
RECEIPTS = [
    ("행복마트 역삼점", [("우유 1L", "2,800"), ("식빵", "3,500"), ("사과 3개", "6,900")]),
    ("하루커피 Cafe", [("아메리카노", "4,500"), ("카페라테", "5,000"), ("치즈케이크", "6,500")]),
    ("푸른약국", [("감기약", "8,000"), ("비타민", "12,000"), ("밴드", "2,500")]),
    ("동네서점", [("소설책", "15,000"), ("잡지", "9,000"), ("엽서", "1,500")]),
    ("맛나분식", [("김밥", "3,500"), ("떡볶이", "4,500"), ("어묵", "2,000")]),
    ("새벽빵집", [("크루아상", "3,800"), ("바게트", "4,200"), ("단팥빵", "2,300")]),
]
CATEGORIES = ["cover", "receipt", "paragraph", "rotated", "blurred", "noisy"]


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


def paragraph(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A multi-line paragraph in a body font."""
    lines = PARAGRAPHS[i % len(PARAGRAPHS)]
    return render_lines(lines, _font(BODY_FONTS[i % len(BODY_FONTS)], rng.choice([30, 34, 38]))), "\n".join(lines)


def cover(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A book cover: a display-font title and an author on a coloured background, cover-sized."""
    title, author = COVERS[i % len(COVERS)]
    bg = rng.choice([(236, 226, 198), (198, 222, 236), (250, 240, 230), (222, 236, 210)])
    img = Image.new("RGB", (600, 900), bg)
    draw = ImageDraw.Draw(img)
    tfont = _font(DISPLAY_FONTS[i % len(DISPLAY_FONTS)], 54 if len(title) < 9 else 46)
    afont = _font(BODY_FONTS[i % len(BODY_FONTS)], 32)
    tw = font_w = tfont.getlength(title)
    draw.rectangle((30, 30, 570, 870), outline=(60, 60, 60), width=3)
    draw.text(((600 - tw) / 2, 300), title, font=tfont, fill=(25, 25, 40))
    font_w = afont.getlength(author)
    draw.text(((600 - font_w) / 2, 700), author, font=afont, fill=(40, 40, 40))
    return img, f"{title}\n{author}"


def receipt(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A narrow receipt: shop name, items with prices, a total."""
    shop, items = RECEIPTS[i % len(RECEIPTS)]
    total = sum(int(p.replace(",", "")) for _, p in items)
    lines = [shop] + [f"{name}  {price}원" for name, price in items] + [f"합계  {total:,}원"]
    font = _font("NanumGothicCoding.ttf", 28)
    return render_lines(lines, font, margin=30, spacing=1.5, bg=(250, 250, 246)), "\n".join(lines)


def rotated(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A paragraph photographed askew (3–8 degrees either way)."""
    img, truth = paragraph(i + 1, rng)
    angle = rng.choice([-1, 1]) * rng.uniform(3, 8)
    return img.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255)), truth


def blurred(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A paragraph out of focus."""
    img, truth = paragraph(i + 2, rng)
    return img.filter(ImageFilter.GaussianBlur(rng.uniform(1.2, 1.8))), truth


def noisy(i: int, rng: random.Random) -> tuple[Image.Image, str]:
    """A paragraph on grey paper with sensor noise and low contrast."""
    img, truth = paragraph(i + 3, rng)
    a = np.asarray(img, dtype=np.float32)
    a = 90 + a * 0.55  # low contrast
    a += np.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(14, 22), a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), truth


MAKERS = {"cover": cover, "receipt": receipt, "paragraph": paragraph, "rotated": rotated,
          "blurred": blurred, "noisy": noisy}


def build_set(per_category: int = 6, seed: int = 7) -> list[Sample]:
    """``per_category`` images of each category (36 by default)."""
    rng = random.Random(seed)
    return [Sample(f"{cat}-{i:02d}", cat, *MAKERS[cat](i, rng))
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
