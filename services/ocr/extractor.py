"""One page at a time: decode -> preprocess -> Tesseract -> (only if it failed) the VLM."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace

from opentelemetry import trace
from PIL import Image, ImageFilter
from prometheus_client import Counter, Histogram

from services.bootstrap.errors import DependencyUnavailable, InvalidInput, Overloaded, Violation
from services.ocr.engine import Line, Recognition, TesseractPool, Word
from services.ocr.enhance import Enhance, Prepared, as_is, as_uploaded, bounded_size, prepare
from services.ocr.imaging import Limits, Preprocess, count_pages, load_pages, to_gray
from services.ocr.plausibility import KoreanPlausibility, Plausibility
from services.ocr.quality import Reading, best, ink_of, judge
from services.ocr.vlm import VisionReader

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("services.ocr")
PAGES = Counter("mesh_ocr_pages", "pages read, by the engine whose text was returned", ["engine"])
FALLBACKS = Counter("mesh_ocr_fallback", "pages Tesseract failed on, by reason and what followed",
                    ["reason", "outcome"])
for _engine in ("tesseract", "vlm"):  # both series exist from the start
    PAGES.labels(_engine)
BUSY = Counter("mesh_ocr_busy_one_reading", "pages read one way only because other pages were being read")
PAGE_SECONDS = Histogram("mesh_ocr_page_seconds", "time per page (preprocess + OCR + VLM)",
                         buckets=(0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8))


@dataclass(frozen=True)
class FallbackPolicy:
    """When Tesseract's answer counts as a failure: no text, low confidence, implausible text, unread ink.

    Tesseract's confidence stays ≈ 85-95 on Korean it misread, so confidence is discounted by the
    share of implausible characters (:mod:`services.ocr.plausibility`), and ink outside every line it
    returned (:mod:`services.ocr.quality`) counts as text it dropped. ``min_plausible_confidence`` and
    ``max_uncovered`` were chosen on the tuning split of bench/ocr_set.py (``python -m bench.ocr_tune``)
    and are reported on the report split (bench/results/ocr.md).
    """

    min_confidence: float = 60.0
    max_low_word_share: float = 0.4
    low_word_confidence: float = 50.0
    min_plausible_confidence: float = 70.0
    max_uncovered: float = 0.15

    def failure(self, rec: Recognition, plausibility: Plausibility | None = None, uncovered: float = 0.0) -> str:
        """The reason Tesseract failed, or "" when its text is accepted."""
        if not rec.text.strip():
            return "no_text"
        if rec.mean_confidence < self.min_confidence:
            return "low_confidence"
        words = rec.word_confidences
        if words and sum(c < self.low_word_confidence for c in words) / len(words) > self.max_low_word_share:
            return "low_word_confidence"
        if (plausibility is not None
                and rec.mean_confidence - 100.0 * plausibility.implausible_share < self.min_plausible_confidence):
            return "implausible_text"
        if uncovered > self.max_uncovered:
            return "unread_ink"
        return ""

    def judge(self, reading: Reading) -> str:
        """:meth:`failure` of one judged reading."""
        return self.failure(reading.rec, reading.plausibility, reading.uncovered)


@dataclass(frozen=True)
class CleanPage:
    """When a page looks clean enough to be read as uploaded only, from what preparing it measured.

    Preparation (:func:`services.ocr.enhance.prepare`) runs beside the reading of the page as uploaded;
    when it neither turned, inverted nor rescaled the page and the page's background spread and ink
    contrast are within these bounds, the prepared page is not read at all: the page costs one
    reading, as plain Tesseract's does (issue 67). Chosen on the tuning split of bench/ocr_set.py with
    ``python -m bench.ocr_tune``; reported on a split drawn after the choice (bench/results/ocr.md).
    """

    max_background_range: float = 10.0
    min_contrast: float = 200.0

    def holds(self, background_range: float, contrast: float) -> bool:
        """Whether a page with these measures is clean."""
        return background_range <= self.max_background_range and contrast >= self.min_contrast


@dataclass(frozen=True)
class ExtractOptions:
    """Per-request options."""

    languages: str = ""
    fallback: bool = True
    deskew: bool = True
    smooth: bool = True


@dataclass
class PageResult:
    """What was read from one page."""

    index: int
    text: str
    lines: list[Line]
    mean_confidence: float
    engine: str  # "tesseract" | "vlm"
    fallback_reason: str = ""
    fallback_error: str = ""
    skew_degrees: float = 0.0
    ocr_size: tuple[int, int] = (0, 0)
    timings: dict[str, int] = field(default_factory=dict)
    image_size: tuple[int, int] = (0, 0)  # the uploaded image after EXIF orientation: words' boxes are in it
    cached: bool = False  # answered from the OCR cache (services/ocr/cache.py)


def _lines(rec: Recognition, prepared: Prepared, upload_size: tuple[int, int]) -> list[Line]:
    """Lines with boxes on the (deskewed) page; their text from the full-page output when the counts agree.

    Each line's words (and their characters) and the line itself are also placed in the uploaded image.
    """
    page_lines = [t for t in rec.text.splitlines() if t.strip()]
    texts = [t.strip() for t in page_lines] if len(page_lines) == len(rec.lines) else [ln.text for ln in rec.lines]

    def up(box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        return prepared.to_upload(box, upload_size)

    out = []
    for t, ln in zip(texts, rec.lines, strict=True):
        words = [Word(w.text, w.confidence, up(w.box), [up(c) for c in w.chars]) for w in ln.words]
        # Tesseract's line box may leave out a word it assigned to the line: the line is around its words.
        box = up(ln.box) if not words else (
            min(w.box[0] for w in words), min(w.box[1] for w in words),
            max(w.box[0] + w.box[2] for w in words) - min(w.box[0] for w in words),
            max(w.box[1] + w.box[3] for w in words) - min(w.box[1] for w in words))
        out.append(Line(t, ln.confidence, prepared.to_page(ln.box), words=words, image_box=box))
    return out


def bounded(image: Image.Image, max_side: int) -> Image.Image:
    """The page as uploaded (colour kept for the VLM), long side at most ``max_side``."""
    if max(image.size) <= max_side:
        return image
    copy = image.copy()
    copy.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return copy


def prepare_page(image: Image.Image, prep: Preprocess, enhance: Enhance) -> Prepared:
    """Grayscale and bounded, then what this page needs (:func:`services.ocr.enhance.prepare`)."""
    # Tesseract thresholds colour uploads per channel, which JPEG chroma noise can ruin: it reads grey.
    prepared = prepare(to_gray(image, prep.max_side), enhance)
    if prep.smooth_radius > 0:
        prepared.image = prepared.image.filter(ImageFilter.GaussianBlur(prep.smooth_radius))
        prepared.steps.append("smooth")
    return prepared


class Extractor:
    """Runs pages on a bounded thread pool; at most ``max_pending`` callers wait for an engine."""

    def __init__(self, pool: TesseractPool, reader: VisionReader | None, policy: FallbackPolicy,
                 limits: Limits, prep: Preprocess, max_pending: int, vlm_timeout_s: float,
                 enhance: Enhance | None = None, plausibility: KoreanPlausibility | None = None,
                 accept_as_uploaded: float | None = None, clean: CleanPage | None = None,
                 one_reading_when_busy: bool = True) -> None:
        self._threads = ThreadPoolExecutor(max_workers=pool.size, thread_name_prefix="ocr")
        # The second reading of a page (as uploaded) runs beside the first on another engine when one is
        # free; each reading takes and returns its engine, so pages never hold one while waiting for another.
        self._second = ThreadPoolExecutor(max_workers=pool.size, thread_name_prefix="ocr-as-is")
        self._prepared = ThreadPoolExecutor(max_workers=pool.size, thread_name_prefix="ocr-prepared")
        self.pool = pool
        self.reader = reader
        self.policy = policy
        self.limits = limits
        self.prep = prep
        self.enhance = enhance or Enhance(deskew=prep.deskew, max_skew_deg=prep.max_skew_deg)
        self.plausibility = plausibility or KoreanPlausibility()
        self._threads.submit(self.plausibility.load)  # ~1-3 s, in the background: warm before the first page
        self.vlm_timeout_s = vlm_timeout_s
        # The quality from which the page read as uploaded is kept without reading the prepared page (None: both).
        self.accept_as_uploaded = accept_as_uploaded
        self.clean = clean  # None: a clean page is read both ways too
        self.one_reading_when_busy = one_reading_when_busy
        self._active = 0  # pages being read now (changed on the event loop only)
        self._slots = asyncio.Semaphore(pool.size + max_pending)

    def clean_page(self, prepared: Prepared) -> bool:
        """Whether the page is read as uploaded only: preparation only flattened it and it measured clean."""
        m = prepared.measures
        return (self.clean is not None and m is not None and prepared.steps == ["flatten"]
                and self.clean.holds(m.background_range, m.contrast))

    def check_languages(self, languages: str) -> None:
        """Reject languages whose traineddata is not installed."""
        missing = [lang for lang in languages.split("+") if lang not in self.pool.available]
        if missing or not languages:
            raise InvalidInput(f"unknown Tesseract languages {languages!r}", [Violation(
                "options.languages", f"installed: {'+'.join(sorted(self.pool.available))}; missing {missing}")])

    async def decode(self, data: bytes, field: str = "content", max_pages: int | None = None,
                     hint: str = "") -> list[Image.Image]:
        """Validate and decode one upload into page images (off the event loop)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, load_pages, data, self.limits, field, max_pages, hint)

    async def count(self, data: bytes, field: str) -> int:
        """Validate one upload and count its pages (PDF pages are not rendered)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, count_pages, data, self.limits, field)

    async def read_page(self, index: int, image: Image.Image, options: ExtractOptions,
                        decode_ns: int = 0) -> PageResult:
        """OCR one decoded page; the VLM only when Tesseract failed and the fallback is on."""
        if self._slots.locked():
            raise Overloaded("every OCR engine is busy and the waiting line is full", retry_after_s=0.5)
        async with self._slots:
            self._active += 1
            try:
                with TRACER.start_as_current_span("ocr.page", attributes={"mesh.ocr.page": index}) as span:
                    page = await self._read(index, image, options, decode_ns)
                    span.set_attributes({"mesh.ocr.engine": page.engine, "mesh.ocr.fallback": page.fallback_reason,
                                         "mesh.ocr.confidence": round(page.mean_confidence, 1)})
                    return page
            finally:
                self._active -= 1

    async def _read(self, index: int, image: Image.Image, options: ExtractOptions, decode_ns: int) -> PageResult:
        start = time.perf_counter_ns()
        languages = options.languages or self.pool.languages
        prep = Preprocess(max_side=self.prep.max_side, deskew=self.prep.deskew and options.deskew,
                          max_skew_deg=self.prep.max_skew_deg,
                          smooth_radius=self.prep.smooth_radius if options.smooth else 0.0)
        enhance = replace(self.enhance, deskew=self.enhance.deskew and prep.deskew)
        loop = asyncio.get_running_loop()
        # Two readings of a page need two engines: while more pages are being read than half the engines,
        # each is read one way (the prepared page, or a clean page as uploaded) and throughput stays near
        # plain Tesseract's instead of half of it (issue 67; bench.ocr --concurrency).
        alone = not self.one_reading_when_busy or 2 * self._active <= self.pool.size

        def work() -> tuple[Reading, int, int]:
            t0 = time.perf_counter_ns()
            # The page as uploaded is read at once, beside the preparation (issue 67): a clean page keeps that
            # reading alone, and otherwise the first of the two readings to finish is kept alone when its
            # quality reaches --accept-as-uploaded.
            early = None
            if alone and enhance.compare_as_uploaded and self.accept_as_uploaded is not None:
                upload = as_uploaded(image, bounded_size(image.size, prep.max_side))
                early = self._second.submit(self.pool.recognize, upload, languages)
            prepared = prepare_page(image, prep, enhance)
            t1 = time.perf_counter_ns()
            second = as_is(image, prepared, enhance)
            if second is None:
                early = None  # an inverted page: the reading as uploaded is dropped (its engine finishes it)
            elif not alone and not self.clean_page(prepared):
                second = early = None  # busy: the prepared reading only
                BUSY.inc()
            elif early is None:
                early = self._second.submit(self.pool.recognize, second.image, languages)

            def as_uploaded_reading() -> Reading | None:
                assert early is not None and second is not None
                try:
                    return judge(second, early.result(), self.plausibility, ink_of(second.flat))
                except Exception:  # noqa: BLE001 - the reading as uploaded is optional: the page keeps the other
                    log.warning("reading page %d as uploaded failed; keeping the prepared reading", index,
                                exc_info=True)
                    return None

            def done(reading: Reading) -> tuple[Reading, int, int]:
                return reading, t1 - t0, time.perf_counter_ns() - t1

            uploaded: Reading | None = None
            tried = False  # the reading as uploaded was judged (or failed)
            if early is not None and self.clean_page(prepared):
                # A clean page is read once, as uploaded, unless that reading fails the fallback policy.
                uploaded, tried = as_uploaded_reading(), True
                if uploaded is not None and not self.policy.judge(uploaded):
                    return done(uploaded)
            prepared_read = self._prepared.submit(self.pool.recognize, prepared.image, languages)

            def prepared_reading() -> Reading:
                return judge(prepared, prepared_read.result(), self.plausibility,
                             ink_of(prepared.image) if "flatten" in prepared.steps else None)

            if early is None:
                return done(prepared_reading())
            mine: Reading | None = None
            bar = self.accept_as_uploaded
            if not tried and bar is not None:
                wait([early, prepared_read], return_when=FIRST_COMPLETED)
                if early.done():
                    uploaded, tried = as_uploaded_reading(), True
                    # Not on a page the preparation turned: its deskewed reading places the words upright.
                    if uploaded is not None and uploaded.quality >= bar and "deskew" not in prepared.steps:
                        return done(uploaded)
                else:
                    mine = prepared_reading()
                    if mine.quality >= bar:
                        return done(mine)
            mine = mine or prepared_reading()
            uploaded = uploaded if tried else as_uploaded_reading()
            return done(best([mine] if uploaded is None else [mine, uploaded]))

        reading, prep_ns, ocr_ns = await loop.run_in_executor(self._threads, work)
        prepared, rec = reading.prepared, reading.rec
        page = PageResult(index=index, text=rec.text, lines=_lines(rec, prepared, image.size),
                          mean_confidence=rec.mean_confidence, engine="tesseract", skew_degrees=prepared.skew,
                          ocr_size=prepared.page_size, image_size=image.size)
        page.fallback_reason = self.policy.judge(reading)
        trace.get_current_span().set_attributes({
            "mesh.ocr.steps": ",".join(prepared.steps),
            "mesh.ocr.implausible": round(reading.plausibility.implausible_share, 3),
            "mesh.ocr.uncovered": round(reading.uncovered, 3)})
        vlm_ns = 0
        if page.fallback_reason:
            if not options.fallback:
                page.fallback_error = "fallback disabled by the request"
            elif self.reader is None:
                page.fallback_error = "vlm_disabled: no VLM configured"
            else:
                t = time.perf_counter_ns()
                try:
                    text = await self.reader.read(bounded(image, prep.max_side), self.vlm_timeout_s)
                except DependencyUnavailable as err:
                    page.fallback_error = err.message
                else:
                    page.text, page.engine = text, "vlm"
                    page.lines = [Line(t, 0.0, (0, 0, 0, 0)) for t in text.splitlines() if t.strip()]
                vlm_ns = time.perf_counter_ns() - t
        if page.fallback_reason:
            outcome = "vlm" if page.engine == "vlm" else ("disabled" if page.fallback_error.startswith(
                ("vlm_disabled", "fallback disabled")) else "vlm_failed")
            FALLBACKS.labels(page.fallback_reason, outcome).inc()
        PAGES.labels(page.engine).inc()
        PAGE_SECONDS.observe((time.perf_counter_ns() - start) / 1e9)
        page.timings = {"decode_ns": decode_ns, "preprocess_ns": prep_ns, "ocr_ns": ocr_ns, "vlm_ns": vlm_ns,
                        "total_ns": decode_ns + time.perf_counter_ns() - start}
        return page

    async def extract(self, data: bytes, options: ExtractOptions, max_pages: int | None = None) -> list[PageResult]:
        """Read every page of one upload."""
        if options.languages:
            self.check_languages(options.languages)
        t = time.perf_counter_ns()
        images = await self.decode(data, "content", max_pages, " for Extract; use SubmitJob for longer documents")
        decode_ns = time.perf_counter_ns() - t
        return list(await asyncio.gather(*[self.read_page(i, img, options, decode_ns // len(images))
                                           for i, img in enumerate(images)]))

    async def close(self) -> None:
        """Stop threads (waiting for pages in progress, off the event loop), release engines and the VLM client."""
        for threads in (self._threads, self._second, self._prepared):
            await asyncio.to_thread(threads.shutdown, True)
        await asyncio.to_thread(self.pool.close)
        if self.reader is not None:
            await self.reader.close()
