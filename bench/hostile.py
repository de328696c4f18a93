"""Hostile input against a running OCR service, and the work each reader does per input byte (issue 75).

Part 1: the OCR service as a process (its defaults: 8 s and 2 GB a file, 100,000 characters a page,
2,000,000 a file), each hostile file of bench/hostile_set.py at full size sent to ``ReadFile`` over gRPC
while a second channel calls the service's health check every 100 ms. Per case: the answer (status and
the bound it names), its time, and the slowest health check while it ran (target: every case a 4xx or
an answer within 10 s, every health check within 1 s).

Part 2: each reader on its worst case found, in this process, at two sizes four times apart: seconds
per MB of input and the ratio of the two times (linear: ~4; the bounds stop the large ones).

    python -m bench.hostile            # ~2 minutes on two cores
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import hostile_set as hostile
from bench.report import write_result


def cases() -> list[tuple[str, bytes]]:
    """The hostile files at the size an attacker would send."""
    return [
        ("HTML: 40 empty comments, no tag (281 bytes)", hostile.html_comments(40)),
        ("HTML: 100,000 comments", hostile.html_comments(100_000)),
        ("PDF: 200 pages sharing one 2 MB text stream", hostile.pdf_shared_stream(200, 2_000_000)),
        ("PDF: 1,000 pages sharing one 90,000-character stream", hostile.pdf_shared_stream(1000, 90_000)),
        ("PDF: one page of 90,000 characters", hostile.pdf_dense_page(90_000)),
        ("DOCX: 200,000 paragraphs (20 MB of XML)", hostile.docx_inflated(200_000)),
        ("DOCX: 40,000 paragraphs (4 MB of XML)", hostile.docx_inflated(40_000)),
        ("HTML: elements nested 100,000 deep", hostile.html_nested(100_000)),
        ("HTML: 2,000,000 elements", b"<html><body>" + b"<p>x</p>" * 2_000_000 + b"</body></html>"),
        ("text: 18 MB of Korean", ("가나다라마바사 " * 800_000).encode()),
    ]


def _health_poller(port: int, stop: threading.Event, times: list[float]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            t = time.perf_counter()
            try:
                stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
            except grpc.RpcError:
                pass
            times.append(time.perf_counter() - t)
            stop.wait(0.1)


def service_part(port: int) -> list[dict[str, Any]]:
    """Each case through ReadFile while health is polled."""
    from clients.errors import MeshClientError
    from clients.ocr import AsyncOcrClient

    rows = []
    for name, data in cases():
        stop, times = threading.Event(), list[float]()
        poller = threading.Thread(target=_health_poller, args=(port, stop, times), daemon=True)
        poller.start()
        t = time.perf_counter()

        async def read(data: bytes = data) -> str:
            client = AsyncOcrClient(f"127.0.0.1:{port}", timeout_s=60)
            try:
                got = await client.read_file(data, timeout_s=60)
                return f"OK {got.kind}, {len(got.text):,} characters"
            except MeshClientError as err:
                return f"{err.code.name}: {err.message}"
            finally:
                await client.close()

        answer = asyncio.run(read())
        took = time.perf_counter() - t
        stop.set()
        poller.join(5)
        rows.append({"case": name, "bytes": len(data), "answer": answer[:160], "s": round(took, 3),
                     "health_max_s": round(max(times), 3) if times else None, "health_calls": len(times)})
        print(f"[bench] {name}: {took:.2f} s, health max {rows[-1]['health_max_s']} s: {answer[:100]}", flush=True)
    return rows


def reader_part() -> list[dict[str, Any]]:
    """Each reader's time per MB on its worst case, at two sizes four times apart (bounds lifted)."""
    from services.ocr.files import read_docx, read_html, read_pdf, read_text, sniff
    from services.ocr.imaging import Limits

    open_limits = Limits(max_page_chars=10**9, max_file_chars=10**10, max_xml_bytes=10**10, max_nodes=10**10,
                         max_bytes=10**9)
    plans = [
        ("sniff (HTML start pattern)", "comments then no tag", lambda n: hostile.html_comments(n),
         lambda d: sniff(d), 20_000),
        ("read_pdf", "one page, n characters", lambda n: hostile.pdf_dense_page(n),
         lambda d: read_pdf(d, open_limits, 10), 25_000),
        ("read_docx", "n paragraphs of 40 syllables", lambda n: hostile.docx_inflated(n),
         lambda d: read_docx(d, open_limits), 5_000),
        ("read_html", "n elements", lambda n: b"<html><body>" + b"<p>x</p>" * n + b"</body></html>",
         lambda d: read_html(d, open_limits), 50_000),
        ("read_html", "nested n deep", lambda n: hostile.html_nested(n), lambda d: read_html(d, open_limits), 50_000),
        ("read_text", "Korean text", lambda n: ("가나다 " * n).encode(), lambda d: read_text(d, open_limits), 200_000),
    ]
    rows = []
    for reader, shape, make, run, n in plans:
        sizes, secs = [], []
        for k in (n, 4 * n):
            data = make(k)
            t = time.perf_counter()
            run(data)
            secs.append(time.perf_counter() - t)
            sizes.append(len(data))
        rows.append({"reader": reader, "worst case": shape, "bytes": sizes, "s": [round(s, 4) for s in secs],
                     "s_per_mb": round(secs[1] / (sizes[1] / 1e6), 4),
                     "ratio_4x": round(secs[1] / max(secs[0], 1e-6), 2)})
        print(f"[bench] {reader} ({shape}): {rows[-1]['s_per_mb']} s/MB, x{rows[-1]['ratio_4x']} for 4x", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run both parts and write bench/results/hostile.{md,json}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="hostile")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    from bench.common import start_service, stop_service
    from services.runtime.processes import start_redis, stop_process

    folder = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    redis, redis_url = start_redis(folder / "redis")
    try:
        ocr, port = start_service("services.ocr", "--redis-url", redis_url, "--engines", "2")
        try:
            service = service_part(port)
        finally:
            stop_service(ocr)
    finally:
        stop_process(redis)
    readers = reader_part()
    body = ["## Hostile files through ReadFile (OCR service process, defaults)", "",
            "| case | bytes | answer | s | slowest health check (s) |", "|---|---:|---|---:|---:|"]
    body += [f"| {r['case']} | {r['bytes']:,} | {r['answer'].replace('|', '/')} | {r['s']} | {r['health_max_s']} |"
             for r in service]
    body += ["", "## Work per input byte, each reader on its worst case (bounds lifted, in process)", "",
             "| reader | worst case | bytes (n, 4n) | s (n, 4n) | s per MB | time ratio for 4x input |",
             "|---|---|---|---|---:|---:|"]
    body += [f"| {r['reader']} | {r['worst case']} | {r['bytes'][0]:,} / {r['bytes'][1]:,} | "
             f"{r['s'][0]} / {r['s'][1]} | {r['s_per_mb']} | {r['ratio_4x']} |" for r in readers]
    print(write_result(args.name, "Hostile input: bounded answers, health while they run, reader work per byte",
                       body, {"service": service, "readers": readers}, out=args.out))


if __name__ == "__main__":
    main()
