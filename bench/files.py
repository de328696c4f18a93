"""Files in, text out (issue 62): character error per format and source, pages a second, time to searchable.

    python -m bench.files [--per-source N] [--seed S] [--name files]

Processes on loopback: Redis, the OCR service (two Tesseract engines), embedding, retrieval and a gateway.
The documents are made by bench/file_set.py from ``--seed`` (the tests use other seeds): digital PDFs
from reportlab and fpdf2 with Nanum fonts, scanned PDFs (pixels only), Word files and HTML pages, each
with the text its pages hold. Reported:

- per source: character error (CER, white space ignored: bench/ocr_set.py) of ``POST /v1/files:read``
  against the truth, the pages' sources, and the time per file; beside it, on the same PDFs, what the
  mesh did before files were read (every page rendered and read by OCR: ``POST /v1/ocr/jobs``);
- a 50-page digital PDF read in one call, three times (pages a second, median), and pdfium's text
  layer alone in this process;
- a 20-page digital PDF stored through ``POST /v1/collections/{name}/files``: the time until its job
  succeeded (read, cut into passages, embedded, stored);
- masking digital résumé PDFs from their text layer (recall, boxes against the ink), beside the same
  pages masked from OCR of their image;
- bad files (truncated, encrypted, a zip bomb, a 5,000-page PDF, a PNG named ``.pdf``, bytes of no
  known type): the status and message, and whether the gateway still reads a good file after each.
"""

from __future__ import annotations

import argparse
import base64
import io
import logging
import statistics
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx

from bench.common import md_table, start_retrieval_pair, start_service, stop_service
from bench.file_set import SOURCES, build_files, long_pdf, reportlab_pdf
from bench.ocr_set import cer
from bench.report import command_line, write_result


def b64(data: bytes) -> str:
    """Standard base64 text."""
    return base64.b64encode(data).decode()


def ocr_job(http: httpx.Client, data: bytes) -> tuple[str, float]:
    """The whole PDF through an OCR job (every page rendered and read by Tesseract): its text, seconds."""
    t = time.perf_counter()
    job = http.post("/v1/ocr/jobs", json={"documents": [{"content_base64": b64(data)}]}).json()
    while job["state"] not in ("succeeded", "failed"):
        time.sleep(0.05)
        job = http.get(f"/v1/ocr/jobs/{job['id']}").json()
    assert job["state"] == "succeeded", job
    return job["result"]["text"], time.perf_counter() - t


def iou(a: list[int] | tuple[int, ...], b: list[int] | tuple[int, ...]) -> float:
    """Intersection over union of two (left, top, width, height) boxes."""
    w = max(0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    h = max(0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / max(1, a[2] * a[3] + b[2] * b[3] - inter)


def mask_job(http: httpx.Client, data: bytes) -> tuple[list[dict], float]:
    """One masking job's findings on its first page, and its seconds."""
    t = time.perf_counter()
    job = http.post("/v1/masking/jobs", json={"documents": [{"content_base64": b64(data)}]}).json()
    while job["state"] not in ("succeeded", "failed"):
        time.sleep(0.05)
        job = http.get(f"/v1/masking/jobs/{job['id']}").json()
    assert job["state"] == "succeeded", job
    return job["result"]["pages"][0]["entities"], time.perf_counter() - t


def masking(http: httpx.Client, seed: int, n: int) -> dict[str, Any]:
    """Digital résumé PDFs masked from their text layer, and the same pages as images masked from OCR.

    An entity is found when a finding of its kind covers it (IoU > 0.3 with its ink); its box is exact
    when that IoU is at least 0.8.
    """
    import pypdfium2 as pdfium

    from bench.file_set import resume_pdfs

    out: dict[str, Any] = {}
    docs = resume_pdfs(seed, n)
    for how in ("text_layer", "ocr_of_the_image"):
        found, exact, total, stray, seconds = 0, 0, 0, 0, []
        for data, gold in docs:
            if how == "ocr_of_the_image":
                pdf = pdfium.PdfDocument(data)
                buf = io.BytesIO()
                pdf[0].render(scale=200 / 72, grayscale=True).to_pil().save(buf, format="PNG")
                pdf.close()
                data = buf.getvalue()
            entities, took = mask_job(http, data)
            seconds.append(took)
            total += len(gold)
            used = set()
            for g in gold:
                best = max(((iou(e["box"], g.box), i) for i, e in enumerate(entities) if e["kind"] == g.kind),
                           default=(0.0, -1))
                if best[0] > 0.3:
                    found += 1
                    exact += best[0] >= 0.8
                    used.add(best[1])
            stray += sum(1 for i, e in enumerate(entities) if i not in used and e["kind"] in ("phone", "email"))
        out[how] = {"entities": total, "recall": found / total, "exact_box_share": exact / max(found, 1),
                    "stray_phone_email": stray, "s_p50": statistics.median(seconds)}
        print(f"[bench] masking {how}: {out[how]}", flush=True)
    return out


def bad_files() -> dict[str, tuple[bytes, str]]:
    """Files that must be refused, each with what a good answer names."""
    from reportlab.lib import pdfencrypt
    from reportlab.pdfgen import canvas

    good = reportlab_pdf([["한 쪽짜리 문서입니다."]], "NanumGothic.ttf")
    buf = io.BytesIO()
    c = canvas.Canvas(buf, encrypt=pdfencrypt.StandardEncryption("secret", canPrint=0))
    c.drawString(72, 720, "secret")
    c.showPage()
    c.save()
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", "<w:document/>")
        z.writestr("word/media/huge.bin", b"\x00" * 200_000_000)
    many = io.BytesIO()
    c = canvas.Canvas(many)
    for _ in range(5000):
        c.drawString(72, 720, "p")
        c.showPage()
    c.save()
    png = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (60, 30), "white").save(png, format="PNG")
    return {"truncated PDF": (good[: len(good) // 2], "unreadable PDF"),
            "encrypted PDF": (buf.getvalue(), "encrypted"),
            "zip bomb (200 MB inside)": (bomb.getvalue(), "decompression bomb"),
            "PDF of 5,000 pages": (many.getvalue(), "5000 pages"),
            "bytes of no known type": (b"\x00\x01\x02\x03" * 100, "not a type"),
            "a PNG named report.pdf": (png.getvalue(), "")}


def main(argv: list[str] | None = None) -> None:
    """Start the services, read every file, write bench/results/<name>.{md,json}."""
    parser = argparse.ArgumentParser(prog="python -m bench.files", description=__doc__.split("\n")[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--seed", type=int, default=6203, help="the documents' seed (the tests use 5, 11, 23)")
    parser.add_argument("--masking", type=int, default=20, help="digital résumé PDFs masked")
    parser.add_argument("--name", default="files")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    from services.ocr.files import read_pdf
    from services.ocr.imaging import Limits
    from services.runtime.models import current_model_dir
    from services.runtime.processes import start_redis, stop_process

    samples = build_files(args.seed, per_source=args.per_source)
    folder = Path(tempfile.mkdtemp(prefix="bench-files-"))
    redis, redis_url = start_redis(folder / "redis")
    procs: list = []
    out: dict[str, Any] = {"seed": args.seed, "per_source": args.per_source, "files": []}
    try:
        ocr, ocr_port = start_service("services.ocr", "--redis-url", redis_url, "--engines", "2")
        procs.append(ocr)
        emb_port, ret_port = start_retrieval_pair(folder / "qdrant", current_model_dir(), procs)
        gw, gw_port = start_service("gateway", "--ocr-target", f"127.0.0.1:{ocr_port}", "--embedding-target",
                                    f"127.0.0.1:{emb_port}", "--retrieval-target", f"127.0.0.1:{ret_port}",
                                    "--default-timeout-ms", "120000")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=300,
                          headers={"X-Request-Timeout-Ms": "120000"}) as http:
            for s in samples:
                t = time.perf_counter()
                r = http.post("/v1/files:read", json={"content_base64": b64(s.data), "filename": s.name})
                took = time.perf_counter() - t
                r.raise_for_status()
                got = r.json()
                row = {"name": s.name, "source": s.source, "pages": len(s.pages), "s": took,
                       "page_sources": [p["source"] for p in got["pages"]],
                       "cer": [cer(truth, p["text"]) for truth, p in zip(s.pages, got["pages"], strict=True)]
                       if s.kind == "pdf" else [cer(s.text, got["text"])]}
                if s.kind == "pdf":  # before: every page rendered and read by OCR
                    text, ocr_s = ocr_job(http, s.data)
                    row["ocr_cer"], row["ocr_s"] = cer(s.text, text), ocr_s
                out["files"].append(row)
                print(f"[bench] {s.name}: cer {row['cer']} {row['page_sources']} {took:.2f}s", flush=True)
            fifty = long_pdf(args.seed + 1, 50)
            times = []
            for _ in range(3):
                t = time.perf_counter()
                http.post("/v1/files:read", json={"content_base64": b64(fifty.data)}).raise_for_status()
                times.append(time.perf_counter() - t)
            limits = Limits()
            local = []
            for _ in range(3):
                t = time.perf_counter()
                read_pdf(fifty.data, limits, 1000)
                local.append(time.perf_counter() - t)
            out["fifty_pages"] = {"route_s": times, "pdfium_s": local}
            twenty = long_pdf(args.seed + 2, 20)
            http.post("/v1/collections", json={"name": "files", "fields": {}}).raise_for_status()
            t = time.perf_counter()
            job = http.post("/v1/collections/files/files", json={"content_base64": b64(twenty.data),
                                                                 "filename": "twenty.pdf"}).json()
            while job["state"] not in ("succeeded", "failed"):
                time.sleep(0.05)
                job = http.get(f"/v1/jobs/{job['id']}").json()
            out["searchable_20_pages"] = {"s": time.perf_counter() - t, "state": job["state"],
                                          "result": job.get("result"), "chars": len(twenty.text)}
            line = twenty.pages[11].splitlines()[3]
            hit = http.post("/v1/search", json={"collection": "files", "query": line, "top_k": 1}).json()["hits"]
            out["searchable_20_pages"]["found"] = bool(hit) and line in hit[0]["text"]
            out["masking"] = masking(http, args.seed + 3, args.masking)
            out["bad"] = []
            probe = build_files(args.seed, per_source=1)[3].data  # a Word file: read after each bad one
            for what, (data, expect) in bad_files().items():
                t = time.perf_counter()
                r = http.post("/v1/files:read", json={"content_base64": b64(data), "filename": "report.pdf"})
                took = time.perf_counter() - t
                after = http.post("/v1/files:read", json={"content_base64": b64(probe)}).status_code
                message = r.json().get("error", {}).get("message", "") if r.status_code != 200 else \
                    f"read as {r.json()['kind']}"
                out["bad"].append({"file": what, "status": r.status_code, "message": message[:200], "s": took,
                                   "named": expect in message, "serving_after": after == 200})
                print(f"[bench] bad: {what} -> {r.status_code} {message[:80]}", flush=True)
    finally:
        for p in procs:
            stop_service(p)
        stop_process(redis)
    write(out, args, argv)


def write(out: dict[str, Any], args: argparse.Namespace, argv: list[str] | None) -> None:
    """The results file."""
    rows = []
    for source in SOURCES:
        fs = [f for f in out["files"] if f["source"] == source]
        if not fs:
            continue
        cers = [c for f in fs for c in f["cer"]]
        sources = sorted({s for f in fs for s in f["page_sources"]})
        pages = sum(f["pages"] for f in fs)
        before = [f["ocr_cer"] for f in fs if "ocr_cer" in f]
        rows.append([source, str(len(fs)), str(pages), ", ".join(sources), f"{statistics.mean(cers):.4f}",
                     f"{max(cers):.4f}", f"{statistics.median(f['s'] / f['pages'] for f in fs) * 1e3:.0f}",
                     f"{statistics.mean(before):.4f}" if before else "–",
                     f"{statistics.median(f['ocr_s'] / f['pages'] for f in fs if 'ocr_s' in f) * 1e3:.0f}"
                     if before else "–"])
    fifty = out["fifty_pages"]
    route, local = statistics.median(fifty["route_s"]), statistics.median(fifty["pdfium_s"])
    s20 = out["searchable_20_pages"]
    body = ["- Processes on loopback: Redis, the OCR service (2 Tesseract engines), embedding, retrieval, a gateway. "
            f"Documents made by bench/file_set.py from seed {out['seed']} (the tests use other seeds); PDFs of two "
            "pages; CER ignores white space.", "",
            md_table(["source", "files", "pages", "page sources", "CER mean", "CER max", "ms a page (p50)",
                      "before: OCR of every page, CER", "before: ms a page"], rows), "",
            f"- A 50-page digital PDF through `POST /v1/files:read`: {route:.2f} s median of 3 = "
            f"**{50 / route:.0f} pages/s**; pdfium's text layer with character boxes alone, in this process: "
            f"{local:.2f} s = {50 / local:.0f} pages/s.",
            f"- A 20-page digital PDF ({s20['chars']:,} characters) stored with `POST /v1/collections/files/files`: "
            f"searchable after **{s20['s']:.1f} s** (job {s20['state']}; read {s20['result'].get('read_ms')} ms, "
            f"written {s20['result'].get('write_ms')} ms); a line of its page 12 found: {s20['found']}.", "",
            "- Masking a digital résumé PDF (phones and e-mails, boxes against the ink of the rendered page): "
            "from its text layer, beside the same page sent as an image (OCR):", "",
            md_table(["read from", "entities", "recall", "IoU ≥ 0.8 among found", "stray phone/e-mail masks",
                      "s a page (p50)"],
                     [[how, str(m["entities"]), f"{m['recall']:.3f}", f"{m['exact_box_share']:.3f}",
                       str(m["stray_phone_email"]), f"{m['s_p50']:.2f}"] for how, m in out["masking"].items()]), "",
            md_table(["bad file", "status", "message", "named", "serving after"],
                     [[b["file"], str(b["status"]), b["message"].replace("|", "/"), str(b["named"]),
                       str(b["serving_after"])] for b in out["bad"]])]
    print(write_result(args.name, "Files in, text out", body, out, out=args.out,
                       command=command_line("bench.files", argv)))


if __name__ == "__main__":
    main()
