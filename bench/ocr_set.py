"""A generated Korean OCR page set with a tuning split and a report split.

Six categories, the ones a new user sends: ``cover`` (display-font titles on gradients, light-on-dark
bands, light titles on mid-tone backgrounds), ``receipt`` (narrow thermal slips, faded ink),
``paragraph`` (clean body text, 20-40 px), ``rotated`` (2-10 degrees either way), ``photo``
(uneven light, blur, sensor noise, JPEG) and ``low_contrast`` (grey on grey, sometimes light text
on dark paper). Deterministic (seeded), rendered with Debian's Nanum fonts (``fonts-nanum``); all
text below was written for this project.

The splits share no text: even-numbered sentences, titles, shops and items belong to ``tune``,
odd-numbered ones to ``report``, and each split has its own random seed (sizes, fonts, colours,
degradations). Parameters are chosen on ``tune``; figures are reported on ``report``.
"""

from __future__ import annotations

import io
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

SENTENCES = [
    "비 오는 날에는 따뜻한 차 한 잔과 함께", "오래된 소설을 다시 천천히 읽는다.",
    "창밖의 빗소리가 문장 사이를 채운다.", "신입 개발자 면접에서는 자료구조와",
    "HTTP 같은 네트워크 기초를 자주 묻는다.", "모르는 질문에는 솔직하게 답하는 편이 낫다.",
    "부모님 결혼기념일 선물로는 함께 보낼", "수 있는 여행 상품이 인기가 많다고 한다.",
    "이 청소기는 무선이라 가볍고 조용하며", "한 번 충전하면 사십 분 동안 쓸 수 있다.",
    "도서관은 오전 아홉 시에 문을 열고", "매주 월요일에는 정기 휴관으로 쉰다.",
    "대출 기간은 이 주일이며 한 번 연장된다.", "검색 결과가 느리면 사용자는 기다리지 않고",
    "다른 앱으로 바로 떠나 버리기 쉽다.", "빠른 응답이 곧 좋은 사용자 경험이다.",
    "주말 농장에서 상추와 고추를 심었더니", "한 달 만에 식탁이 풍성해졌다.",
    "겨울 산행에는 방수 장갑과 여벌 양말을", "반드시 챙겨 가는 것이 좋다.",
    "회의록은 결정 사항과 담당자를 먼저 적고", "세부 논의는 그 아래에 정리한다.",
    "새로 문을 연 동네 빵집은 아침마다", "갓 구운 식빵 냄새로 골목을 채운다.",
    "아이에게 줄 그림책을 고를 때는", "문장이 짧고 그림이 큰 책이 좋다.",
    "이번 분기 매출은 지난해보다 12% 늘었고", "온라인 주문 비중이 절반을 넘었다.",
    "자전거 출퇴근을 시작한 지 석 달 만에", "체력이 눈에 띄게 좋아졌다.",
    "전시회 입장권은 현장에서도 살 수 있지만", "미리 예매하면 천 원을 할인해 준다.",
    "노트북 배터리를 오래 쓰려면 충전을", "팔십 퍼센트 정도에서 멈추는 것이 좋다.",
    "고객 문의에는 하루 안에 답변하는 것을", "원칙으로 삼고 있습니다.",
    "시험 전날에는 새로운 내용을 외우기보다", "틀린 문제를 다시 풀어 보는 편이 낫다.",
    "강아지 산책은 하루 두 번, 삼십 분씩", "꾸준히 시키는 것이 건강에 좋다.",
    "이 제품은 생활 방수가 되지만 수영이나", "샤워 중에는 착용하지 마십시오.",
    "여름 휴가철에는 항공권 가격이 오르므로", "두 달 전에 예약하는 것을 권한다.",
    "점심시간에는 회사 근처 국숫집 앞에", "늘 긴 줄이 늘어서 있다.",
    "포트폴리오에는 결과보다 문제를 어떻게", "풀었는지가 잘 드러나야 한다.",
    "할머니 댁 마당에는 봄마다 목련이", "하얗게 피었다가 금세 진다.",
    "배송은 결제 후 이틀 안에 시작되며", "제주 지역은 하루가 더 걸립니다.",
    "좋은 의자는 허리를 받쳐 주고 높이를", "쉽게 바꿀 수 있어야 한다.",
    "기차가 터널을 빠져나오자 바다가", "창문 가득 펼쳐졌다.",
    "Python 스크립트로 매일 아침 보고서를", "자동으로 만들어 메일로 보낸다.",
    "작은 화분 하나가 사무실 분위기를", "생각보다 많이 바꿔 놓는다.",
]
TITLES = [
    ("바다가 들려준 이야기", "어느 등대지기의 기록"), ("오늘의 요리 수업", "집밥을 위한 서른 가지 방법"),
    ("작은 가게의 큰 꿈", "골목 상권 생존기"), ("밤하늘 별자리 여행", "초보자를 위한 관측 안내"),
    ("한국어 문장 연습", "짧고 분명하게 쓰는 법"), ("AI 시대의 글쓰기", "기계와 함께 생각하기"),
    ("숲으로 가는 길", "계절마다 걷는 산책"), ("데이터로 읽는 도시", "숫자 속 사람들의 하루"),
    ("엄마의 정원", "꽃과 채소를 함께 기르다"), ("처음 만나는 경제", "용돈부터 투자까지"),
    ("고양이의 오후", "창가에서 보낸 일 년"), ("면접의 기술", "신입 개발자를 위한 준비"),
    ("바람이 머무는 섬", "제주 한 달 살기"), ("커피 한 잔의 과학", "원두에서 잔까지"),
    ("여름밤의 음악회", "클래식 입문 안내서"), ("우리 동네 역사", "골목마다 남은 이야기"),
    ("마음을 여는 대화", "관계를 바꾸는 말하기"), ("겨울 캠핑 안내", "따뜻하게 자는 법"),
    ("수학이 쉬워지는 시간", "중학생을 위한 개념 정리"), ("오래된 지도", "잃어버린 마을을 찾아서"),
]
SURNAMES = ["김", "이", "박", "최", "정", "한", "조", "윤", "장", "임", "오", "서"]
GIVEN = ["서연", "민준", "하늘", "우진", "지아", "도윤", "수아", "예준", "지호", "하은", "시우", "유나"]
ROLES = ["지음", "엮음", "글", "옮김", "지음", "쓰고 그림"]
PUBLISHERS = ["푸른숲출판", "새벽책방", "한빛문고", "다람출판사", "별빛북스", "온누리출판"]
SHOPS = [
    "행복마트 역삼점", "하루커피 Cafe", "푸른약국", "동네서점", "맛나분식", "새벽빵집", "초록문구",
    "바른정육점", "해피세탁소", "우리꽃집", "한솔철물", "미소김밥",
]
ITEMS = [
    "우유 1L", "식빵", "사과 3개", "아메리카노", "카페라테", "치즈케이크", "감기약", "비타민", "반창고",
    "소설책", "월간 잡지", "엽서 세트", "김밥", "떡볶이", "어묵", "크루아상", "바게트", "단팥빵",
    "볼펜 2자루", "공책", "삼겹살 600g", "목살", "셔츠 세탁", "정장 드라이", "장미 한 다발", "화분",
    "건전지 AA", "드라이버", "참치김밥", "라면",
]
CATEGORIES = ["cover", "receipt", "paragraph", "rotated", "photo", "low_contrast"]
SPLITS = {"tune": 0, "report": 1}
SEEDS = {"tune": 1401, "report": 2402}


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


MAKERS = {"cover": cover, "receipt": receipt, "paragraph": paragraph, "rotated": rotated,
          "photo": photo, "low_contrast": low_contrast}


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
