"""ReadFile: a file's pages from its own text where it has usable text, from OCR where it does not.

:mod:`services.ocr.files` reads the bytes (type, text layer, bounds); this module runs that on the
extractor's worker threads, sends the PDF pages without a usable layer through the same OCR path as
``Extract`` (Tesseract first, the VLM on failure), and returns every page as a
:class:`~services.ocr.extractor.PageResult`: a text-layer page with lines and words whose boxes (and each
character's box) come from the PDF itself, exact, in the page as rendered at the service's resolution.
"""

from __future__ import annotations

import asyncio
import time

from services.bootstrap.errors import InvalidInput, Violation
from services.ocr.engine import Line, Word
from services.ocr.extractor import ExtractOptions, Extractor, PageResult
from services.ocr.files import (
    Char,
    FileReading,
    LayerPage,
    judge_layers,
    read_docx,
    read_html,
    read_pdf,
    read_text,
    render_pages,
    sniff,
)
from services.ocr.sandbox import ReadingProcesses

READERS = {"docx": read_docx, "html": read_html, "text": read_text}


def _union(boxes: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """(left, top, width, height) around (left, top, right, bottom) boxes."""
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    return left, top, max(b[2] for b in boxes) - left, max(b[3] for b in boxes) - top


def layer_lines(chars: list[Char]) -> list[Line]:
    """The layer's lines (split at line breaks) and words (split at white space), with boxes from the characters."""
    lines: list[Line] = []
    current: list[list[Char]] = [[]]

    def close_line() -> None:
        words = []
        for run in current:
            boxed = [c.box for c in run if c.box is not None]
            if run and boxed:
                words.append(Word("".join(c.text for c in run), 100.0, _union(boxed),
                                  [_union([c.box]) if c.box else _union(boxed) for c in run]))
        if words:
            lines.append(Line(" ".join(w.text for w in words), 100.0,
                              _union([(w.box[0], w.box[1], w.box[0] + w.box[2], w.box[1] + w.box[3]) for w in words]),
                              words))
            lines[-1].image_box = lines[-1].box

    for c in chars:
        if c.text == "\n":
            close_line()
            current = [[]]
        elif c.text.isspace():
            if current[-1]:
                current.append([])
        else:
            current[-1].append(c)
    close_line()
    return lines


def layer_page(page: LayerPage) -> PageResult:
    """A page read from the file's own text."""
    return PageResult(index=page.index, text=page.text, lines=layer_lines(page.chars), mean_confidence=100.0,
                      engine="text_layer", image_size=page.size)


def layer_pages(reading: FileReading, plausibility) -> dict[int, PageResult]:
    """The pages of a reading whose layer is usable (judged here: services.ocr.files.judge_layers), as results."""
    if reading.kind == "pdf" and plausibility is not None:
        judge_layers(reading, plausibility)
    return {p.index: layer_page(p) for p in reading.pages if not p.problem}


class FileReader:
    """Reads files of every kind the service knows (see the module doc).

    The file's parsing (and the rendering of pages OCR reads) runs in a child process under the
    service's work budget (:class:`~services.ocr.sandbox.ReadingProcesses`); judging the layers and
    building the pages runs on the extractor's threads. The event loop only sniffs the first 2 KB.
    """

    def __init__(self, extractor: Extractor, max_pages: int, max_ocr_pages: int,
                 processes: ReadingProcesses | None = None) -> None:
        self.extractor = extractor
        self.max_pages = max_pages  # pages of a PDF (text layer or not)
        self.max_ocr_pages = max_ocr_pages  # of them, pages without a usable layer, read by OCR in one call
        self.processes = processes or ReadingProcesses()

    async def read(self, data: bytes, options: ExtractOptions) -> tuple[str, list[PageResult], dict[int, str]]:
        """The file's kind, its pages, and why each OCR-read PDF page's layer was not used."""
        if options.languages:
            self.extractor.check_languages(options.languages)
        kind = sniff(data)
        if kind == "image":
            return kind, await self.extractor.extract(data, options, 1), {}
        loop = asyncio.get_running_loop()
        threads = self.extractor._threads
        t = time.perf_counter_ns()
        if kind == "pdf":
            reading: FileReading = await self.processes.run(read_pdf, data, self.extractor.limits, self.max_pages)
        else:
            reading = await self.processes.run(READERS[kind], data, self.extractor.limits)
        pages = await loop.run_in_executor(threads, layer_pages, reading, self.extractor.plausibility)
        read_ns = time.perf_counter_ns() - t
        problems = {p.index: p.problem for p in reading.pages if p.problem}
        if len(problems) > self.max_ocr_pages:
            why = (f"{len(problems)} pages have no usable text layer and need OCR, over the limit of "
                   f"{self.max_ocr_pages} in one read; submit the file as an OCR job")
            raise InvalidInput(f"content: {why}", [Violation("content", why)])
        share = read_ns // max(len(reading.pages), 1)
        for p in pages.values():
            p.timings = {"decode_ns": share, "total_ns": share}
        if problems:
            t = time.perf_counter_ns()
            images = await self.processes.run(render_pages, data, self.extractor.limits, list(problems))
            render_ns = (time.perf_counter_ns() - t) // len(images)
            read = await asyncio.gather(*[self.extractor.read_page(i, img, options, render_ns)
                                          for i, img in zip(problems, images, strict=True)])
            pages.update({p.index: p for p in read})
        return kind, [pages[i] for i in sorted(pages)], problems
