"""OCR bench: the service beside plain Tesseract, per category, on the same images.

    python -m bench.ocr [--split fresh] [--per-category 12] [--rounds 2] [--concurrency 4] [--out bench/results]

The images come from bench/ocr_set.py's ``fresh`` split by default (drawn after issue 67's last
change; no text or seed shared with the ``tune`` split that bench/ocr_tune.py chose the defaults
on); ``--split report`` gives the earlier report split, ``--split tune`` the tuning pages. The
service runs as a process with its default settings (two engines), called over gRPC one page at a
time; plain Tesseract (tesserocr, kor+eng, psm 6, the uploaded image as it is) runs in this process
on the same images. The VLM fallback is off: the trigger is judged as a detector of pages with
CER > 0.2, on the service's pages and, with the same policy applied in process, on plain Tesseract's.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tesserocr
from PIL import Image

from bench.common import LatencyStats, md_table, start_service, stop_service
from bench.ocr_set import CATEGORIES, build_set, cer
from bench.report import write_result
from clients.ocr import AsyncOcrClient
from services.ocr.engine import TesseractPool
from services.ocr.enhance import Prepared, flatten
from services.ocr.extractor import FallbackPolicy
from services.ocr.imaging import to_gray
from services.ocr.plausibility import KoreanPlausibility
from services.ocr.quality import ink_of, judge

FAILURE_CER = 0.2


class Plain:
    """Plain Tesseract (psm 6, no preprocessing) in this process, its pages judged by the service's policy.

    The policy's unread-ink signal needs the page's ink: it is taken from the page flattened as the
    service flattens it (outside the timed recognition).
    """

    def __init__(self) -> None:
        self.pool = TesseractPool("", "kor+eng", 1, psm=tesserocr.PSM.SINGLE_BLOCK)
        self.scorer, self.policy = KoreanPlausibility(), FallbackPolicy()

    def read(self, sample, payload: bytes, row: dict) -> None:
        """Decode and read one upload, timing the recognition alone and with the decoding."""
        t = time.perf_counter()
        decoded = Image.open(io.BytesIO(payload))
        decoded.load()
        t_read = time.perf_counter()
        rec = self.pool.recognize(decoded)
        elapsed = time.perf_counter() - t_read
        page = Prepared(image=sample.image, page_size=sample.image.size)
        reading = judge(page, rec, self.scorer, ink_of(flatten(to_gray(sample.image, 1920)).image))
        row.update(cer=cer(sample.truth, rec.text), confidence=rec.mean_confidence,
                   fallback_reason=self.policy.judge(reading))
        row["seconds"].append(elapsed)
        row["with_decoding"].append(elapsed + t_read - t)


async def read_both(port: int, samples, rounds: int) -> tuple[dict, dict]:
    """Every image ``rounds`` times, plain Tesseract then the service's Extract, one after the other.

    Interleaved page by page, so a change in the machine's speed during the run (other tenants,
    clocks) falls on both alike: two runs that timed all of one and then all of the other gave
    ratios of 1.24 and 1.06 on the same split.
    """
    svc: dict = {}
    plain: dict = {}
    reader = Plain()
    client = AsyncOcrClient(f"127.0.0.1:{port}")
    try:
        payloads = {s.name: s.png() for s in samples}
        for s in samples[:2]:  # warm-up
            await client.extract(payloads[s.name], timeout_s=60)
            reader.pool.recognize(s.image)
        for _ in range(rounds):
            for s in samples:
                reader.read(s, payloads[s.name], plain.setdefault(
                    s.name, {"category": s.category, "seconds": [], "with_decoding": []}))
                t = time.perf_counter()
                _, pages = await client.extract(payloads[s.name], timeout_s=60)
                elapsed = time.perf_counter() - t
                page = pages[0]
                row = svc.setdefault(s.name, {"category": s.category, "seconds": []})
                row.update(cer=cer(s.truth, page.text), fallback_reason=page.fallback_reason,
                           confidence=page.mean_confidence)
                row["seconds"].append(elapsed)
    finally:
        await client.close()
        reader.pool.close()
    return svc, plain


def detector(rows: list[dict]) -> dict:
    """Precision and recall of the fallback trigger for pages with CER > FAILURE_CER."""
    failed = [r for r in rows if r["cer"] > FAILURE_CER]
    flagged = [r for r in rows if r["fallback_reason"]]
    hit = [r for r in flagged if r["cer"] > FAILURE_CER]
    return {"pages": len(rows), "failed": len(failed), "flagged": len(flagged), "caught": len(hit),
            "recall": len(hit) / len(failed) if failed else None,
            "precision": len(hit) / len(flagged) if flagged else None}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


async def under_load(port: int, samples, callers: int) -> dict:
    """Every page once through ``callers`` concurrent Extract callers, then plain Tesseract on two threads."""
    payloads = [s.png() for s in samples]
    client, pending, cers, seconds = AsyncOcrClient(f"127.0.0.1:{port}"), list(range(len(samples))), [], []

    async def caller() -> None:
        while pending:
            i = pending.pop()
            t = time.perf_counter()
            _, pages = await client.extract(payloads[i], timeout_s=300)
            seconds.append(time.perf_counter() - t)
            cers.append(cer(samples[i].truth, pages[0].text))

    t = time.perf_counter()
    await asyncio.gather(*[caller() for _ in range(callers)])
    wall = time.perf_counter() - t
    await client.close()
    pool = TesseractPool("", "kor+eng", 2)
    with ThreadPoolExecutor(2) as threads:
        t = time.perf_counter()
        plain = list(threads.map(lambda i: pool.recognize(Image.open(io.BytesIO(payloads[i]))), range(len(samples))))
        plain_wall = time.perf_counter() - t
    pool.close()
    return {"callers": callers, "pages_per_s": len(samples) / wall, "p50_ms": 1e3 * statistics.median(seconds),
            "cer": statistics.mean(cers), "plain_pages_per_s": len(samples) / plain_wall,
            "plain_cer": statistics.mean(cer(s.truth, r.text) for s, r in zip(samples, plain, strict=True))}


def write_report(args, samples, svc: dict, plain: dict, load: dict | None) -> None:
    """Markdown and JSON into bench/results/."""
    rows, lat_rows = [], []
    for cat in [*CATEGORIES, "first six", "all"]:
        pick = [n for n, r in svc.items() if cat == "all" or r["category"] == cat
                or (cat == "first six" and r["category"] in CATEGORIES[:6])]
        s_cer = statistics.mean(svc[n]["cer"] for n in pick)
        p_cer = statistics.mean(plain[n]["cer"] for n in pick)
        rows.append([cat, str(len(pick)), f"{p_cer:.3f}", f"{s_cer:.3f}", f"{s_cer / p_cer:.2f}" if p_cer else "n/a"])
        s_lat = LatencyStats.of([x for n in pick for x in svc[n]["seconds"]])
        p_lat = LatencyStats.of([x for n in pick for x in plain[n]["seconds"]])
        d_lat = LatencyStats.of([x for n in pick for x in plain[n]["with_decoding"]])
        lat_rows.append([cat, str(s_lat.n), f"{p_lat.p50:.0f}", f"{d_lat.p50:.0f}", f"{s_lat.p50:.0f}",
                         f"{s_lat.p95:.0f}", f"{s_lat.p50 / p_lat.p50:.2f}", f"{s_lat.p50 / d_lat.p50:.2f}"])
    det_svc, det_plain = detector(list(svc.values())), detector(list(plain.values()))
    det_all = detector(list(svc.values()) + list(plain.values()))
    reasons = sorted({r["fallback_reason"] for r in svc.values() if r["fallback_reason"]})
    lines = [
        f"- Set: the **{args.split}** split of bench/ocr_set.py, {len(samples)} generated pages, {args.per_category} "
        "per category, Nanum fonts, text written for the project. \"first six\" are the kinds issue 67 was filed "
        "on; thermal, phone, screenshot and form were added by it. Defaults (the page read as uploaded beside its "
        "preparation, kept alone from quality 88 or when the page measured clean; table rules erased; line height "
        "48; the better of two readings kept by confidence − 100 × (implausible + unread-ink share); fallback when "
        "confidence − 100 × implausible share < 70 or unread ink > 0.15) were chosen on the **tune** split with "
        "`python -m bench.ocr_tune` (its own texts and seed)"
        + ("." if args.split == "tune" else "; nothing was chosen on this split."),
        "- Plain Tesseract and the service read each page in turn (interleaved page by page). "
        "Service: default settings but the OCR cache off (`--ocr-cache-ttl-s 0`: the second round would be "
        "answered from it), 2 engines, Extract over gRPC one call at a time (a page read two ways uses both "
        "engines at once). Plain Tesseract: tesserocr 5, kor+eng, psm 6, the uploaded image as it is, in the "
        "bench process (no gRPC; timed with and without decoding the same PNG); its pages are judged by the "
        "same fallback policy, the unread-ink share measured on the page flattened as the service does it.",
        "- CER = edit distance / truth characters, whitespace ignored.", "",
        "## CER per category (lower is better)", "",
        md_table(["category", "pages", "plain Tesseract", "service", "service / plain"], rows), "",
        "## Latency per page (ms; service: whole Extract call, PNG bytes in; plain: recognition of the decoded "
        "image, and with decoding the same PNG bytes)", "",
        md_table(["category", "n", "plain p50", "plain p50 with decoding", "service p50", "service p95",
                  "service / plain p50", "service / plain with decoding"], lat_rows), "",
        f"## Failure detector (VLM trigger) for pages with CER > {FAILURE_CER}", "",
        md_table(["pages judged", "pages", "CER > 0.2", "flagged", "caught", "recall", "precision"], [
            ["service output", str(det_svc["pages"]), str(det_svc["failed"]), str(det_svc["flagged"]),
             str(det_svc["caught"]), _fmt(det_svc["recall"]), _fmt(det_svc["precision"])],
            ["plain Tesseract output", str(det_plain["pages"]), str(det_plain["failed"]), str(det_plain["flagged"]),
             str(det_plain["caught"]), _fmt(det_plain["recall"]), _fmt(det_plain["precision"])],
            ["both", str(det_all["pages"]), str(det_all["failed"]), str(det_all["flagged"]),
             str(det_all["caught"]), _fmt(det_all["recall"]), _fmt(det_all["precision"])]]), "",
        f"Reasons the service gave: {', '.join(reasons) or 'none'}.", "",
    ]
    if load:
        lines += [f"## Under load: {load['callers']} concurrent callers, every page once", "",
                  "Plain Tesseract: two engines on two threads, decoding included. " + (
                      "Every page read both ways whatever the load." if "--no-one-reading-when-busy" in args.service_arg
                      else "Pages read one way while others wait (`--one-reading-when-busy`)."), "",
                  md_table(["", "pages/s", "p50 ms", "CER"], [
                      ["service", f"{load['pages_per_s']:.2f}", f"{load['p50_ms']:.0f}", f"{load['cer']:.3f}"],
                      ["plain Tesseract", f"{load['plain_pages_per_s']:.2f}", "", f"{load['plain_cer']:.3f}"]]), ""]
    name = args.name or ("ocr" if args.split == "fresh" else f"ocr_{args.split}")
    flags = "".join(f", {a}" for a in args.service_arg)
    print(write_result(name, f"OCR bench ({args.split} split{flags})",
                       lines, {"split": args.split, "service": svc, "plain": plain, "load": load,
        "detector": {"service": det_svc, "plain": det_plain, "both": det_all}}, out=args.out))


def main() -> None:
    """Start the service, run the report split through it and through plain Tesseract, write the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.ocr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["fresh", "report", "tune"], default="fresh")
    parser.add_argument("--per-category", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the set")
    parser.add_argument("--concurrency", type=int, default=0, help="also every page once through this many "
                        "concurrent callers, beside plain Tesseract on two threads (0: not)")
    parser.add_argument("--service-arg", action="append", default=[], help="a flag for the OCR service "
                        "(repeatable), e.g. --service-arg=--no-one-reading-when-busy")
    parser.add_argument("--name", default="", help="result file name (default: ocr, or ocr_<split>)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    samples = build_set(args.per_category, args.split)
    # The OCR cache off: a repeated round would be answered from it (and with no Redis here every look-up
    # fails open first, ~10 ms a call).
    proc, port = start_service("services.ocr", "--job-workers", "0", "--ocr-cache-ttl-s", "0", *args.service_arg)
    try:
        svc, plain = asyncio.run(read_both(port, samples, args.rounds))
        load = asyncio.run(under_load(port, samples, args.concurrency)) if args.concurrency else None
    finally:
        stop_service(proc)
    write_report(args, samples, svc, plain, load)


if __name__ == "__main__":
    main()
