"""Every file reader bounded by its work, not only its bytes (issue 75): each hostile file a named 400.

The files are made by bench/hostile_set.py at a size that shows the bound with small limits; the bench
(bench/hostile.py) sends the full-size ones to a running service. Readers run in a child process under
a wall-clock and memory budget (services/ocr/sandbox.py): a reading that outlives it is killed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from bench import hostile_set as hostile
from services.bootstrap.errors import InvalidInput
from services.ocr.files import read_docx, read_html, read_pdf, read_text, sniff
from services.ocr.imaging import Limits
from services.ocr.sandbox import Budget, ReadingProcesses

SMALL = Limits(max_page_chars=20_000, max_file_chars=50_000, max_xml_bytes=200_000, max_nodes=5_000)


def test_the_281_byte_html_upload_is_sniffed_at_once():
    data = hostile.html_comments(40)
    assert len(data) == 281
    t = time.perf_counter()
    assert sniff(data) == "text"  # no tag after the comments: not HTML
    assert sniff(b"<!-- a -->" * 150 + b"<html><body>x</body></html>") == "html"
    assert time.perf_counter() - t < 0.05


def test_a_pdf_page_over_its_character_bound_is_refused_before_its_boxes_are_read():
    with pytest.raises(InvalidInput, match="page 1's text layer holds .* over the limit of 20,000 a page"):
        read_pdf(hostile.pdf_dense_page(30_000), SMALL, 100)


def test_pages_sharing_one_stream_are_refused_by_the_file_bound():
    data = hostile.pdf_shared_stream(pages=10, chars=10_000)  # 100,000 characters from one stream
    with pytest.raises(InvalidInput, match="over 50,000 characters by page 5"):
        read_pdf(data, SMALL, 100)


def test_docx_xml_bytes_and_elements_are_bounded():
    with pytest.raises(InvalidInput, match="XML parts inflate to .* over the limit of 200,000"):
        read_docx(hostile.docx_inflated(2_000), SMALL)
    with pytest.raises(InvalidInput, match="over 5,000 XML elements"):
        read_docx(hostile.docx_nodes(6_000), Limits(max_nodes=5_000))
    assert read_docx(hostile.docx_inflated(100), SMALL).pages[0].text.count("\n") == 99


def test_html_elements_text_and_depth_are_bounded():
    many = b"<html><body>" + b"<p>x</p>" * 6_000 + b"</body></html>"
    with pytest.raises(InvalidInput, match="over 5,000 HTML elements"):
        read_html(many, SMALL)
    assert read_html(hostile.html_nested(200), SMALL).pages[0].text == "깊은"
    read_html(hostile.html_nested(100_000), SMALL)  # as deep as the parser allows: no recursion in the walk
    with pytest.raises(InvalidInput, match="characters of text, over the limit of 50,000"):
        read_text(("가" * 60_000).encode(), SMALL)


def test_a_reading_over_its_budget_is_killed_and_named():
    processes = ReadingProcesses(Budget(seconds=1.0, memory_mb=2048), concurrency=1)
    data = hostile.pdf_shared_stream(pages=50, chars=400_000)  # ~0.5 s a page: 25 s unbounded
    t = time.perf_counter()
    with pytest.raises(InvalidInput, match="took over 1 s, the work budget of one file"):
        asyncio.run(processes.run(read_pdf, data, Limits(max_page_chars=10**9, max_file_chars=10**10), 100))
    assert time.perf_counter() - t < 4


def test_a_reading_over_its_memory_is_named_and_a_good_file_still_reads():
    processes = ReadingProcesses(Budget(seconds=20, memory_mb=400), concurrency=1)
    page = b"<html><body>" + b"<p>x</p>" * 2_000_000 + b"</body></html>"  # 16 MB: a tree of ~1 GB
    with pytest.raises(InvalidInput, match="400 MB|unreadable"):
        asyncio.run(processes.run(read_html, page, Limits(max_nodes=10**8, max_file_chars=10**9)))
    reading = asyncio.run(processes.run(read_text, "안녕하세요".encode(), Limits()))
    assert reading.pages[0].text == "안녕하세요"
