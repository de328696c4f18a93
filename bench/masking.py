"""Personal data on résumé images: masking jobs through the gateway beside Presidio's image redactor.

The set is bench/masking_set.py (six conditions: clean scan, noise, slight rotation, photo of a
printed page, low contrast, small print; every page's personal data with its ink box). The mesh
runs as processes on loopback — Redis, the OCR service (2 engines), a gateway — and each page is one
``POST /v1/masking/jobs`` with ``masked_png``, polled until done, its PNG fetched; the time per page
is submit to PNG in hand. Then the same page is submitted again (the OCR cache answers) and read
once more through ``POST /v1/ocr:extract`` (first read and repeat side by side).

Presidio: ``presidio-image-redactor``'s ImageAnalyzerEngine with its TesseractOCR (pytesseract,
``lang=kor+eng``: the same Tesseract 5 and traineddata) and, as its text analyser, the pattern
recognizers of presidio-analyzer that apply to Korean (as in bench/pii_text.py: no NLP engine,
whose models come from a model hub).

Scoring (both the same way, kind-agnostic: masking is about what is blacked out):
- an entity is *found* when the masked boxes cover at least 60 % of its ink box;
- *box IoU* is the best IoU between the entity's box and a finding's box (the mesh: one box per
  finding; Presidio: its word boxes of one finding merged);
- a masked box that *covers no personal data* overlaps every entity's box by under 10 % of its area.
"""

from __future__ import annotations

import argparse
import base64
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, md_table, start_service, stop_service
from bench.masking_set import CONDITIONS, Entity, MaskingSample, build
from bench.picture_set import MASKED_KINDS, PictureSample
from bench.picture_set import build as build_pictures
from bench.report import write_result

Box = tuple[int, int, int, int]


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (left, top, width, height) boxes."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    inter = max(0, w) * max(0, h)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter) if inter else 0.0


def covered(box: Box, masks: list[Box], size: tuple[int, int]) -> float:
    """Share of ``box``'s area under the union of ``masks``."""
    x, y, w, h = box
    grid = np.zeros((max(1, h), max(1, w)), bool)
    for mx, my, mw, mh in masks:
        grid[max(0, my - y):max(0, my + mh - y), max(0, mx - x):max(0, mx + mw - x)] = True
    return float(grid.mean())


def overlap_share(box: Box, others: list[Box]) -> float:
    """The largest share of ``box``'s area inside one of ``others``."""
    best = 0.0
    for o in others:
        w = min(box[0] + box[2], o[0] + o[2]) - max(box[0], o[0])
        h = min(box[1] + box[3], o[1] + o[3]) - max(box[1], o[1])
        best = max(best, max(0, w) * max(0, h) / max(1, box[2] * box[3]))
    return best


def score_page(gold: list[Entity], found: list[tuple[Box, list[Box]]], size: tuple[int, int]) -> dict[str, Any]:
    """Found entities, their IoUs, and masked boxes covering no personal data, for one page."""
    masks = [m for _, ms in found for m in ms]
    hits = 0
    ious: list[float] = []
    kinds: dict[str, list[int]] = {}
    for g in gold:
        ok = covered(g.box, masks, size) >= 0.6
        hits += ok
        k = kinds.setdefault(g.kind, [0, 0])
        k[0] += 1
        k[1] += ok
        if ok:
            ious.append(max((iou(g.box, box) for box, _ in found), default=0.0))
    stray = sum(overlap_share(m, [g.box for g in gold]) < 0.1 for m in masks)
    return {"gold": len(gold), "found": hits, "ious": ious, "masks": len(masks), "stray": stray, "kinds": kinds}


def score_pictures(samples: list[PictureSample], scores: list[dict]) -> dict[str, Any]:
    """Photos masked (≥ 90 % of the photo's box under picture findings), other pictures masked (≥ 10 %), stray."""
    photos = found = others = others_masked = stray = findings = 0
    by_kind: dict[str, list[int]] = {}
    for s, sc in zip(samples, scores, strict=True):
        boxes = [b for _, b in sc["pictures"]]
        findings += len(boxes)
        for p in s.pictures:
            k = by_kind.setdefault(p.kind, [0, 0])
            k[0] += 1
            if p.kind in MASKED_KINDS:
                photos += 1
                ok = covered(p.box, boxes, s.image.size) >= 0.9
                found += ok
            else:
                others += 1
                ok = covered(p.box, boxes, s.image.size) >= 0.1
                others_masked += ok
            k[1] += ok
        stray += sum(overlap_share(b, [p.box for p in s.pictures if p.kind in MASKED_KINDS]) < 0.1 for b in boxes)
    return {"photos": photos, "photos_masked": found, "recall": found / max(1, photos), "others": others,
            "others_masked": others_masked, "others_share": others_masked / max(1, others), "findings": findings,
            "stray": stray, "by_kind": by_kind}


def save_example(name: str, before: Any, after: bytes, out: Path) -> None:
    """A page before and after masking (its top 60 %, half size) for the docs: ``<out>/masking-{before,after}.png``."""
    from PIL import Image

    for label, img in (("before", before.convert("RGB")), ("after", Image.open(io.BytesIO(after)).convert("RGB"))):
        img.crop((0, 0, img.width, int(img.height * 0.6))).resize(
            (img.width // 2, int(img.height * 0.6) // 2), Image.Resampling.LANCZOS).save(out / f"masking-{label}.png")
    print(f"[bench] example page {name} saved in {out}", flush=True)


def run_mesh(samples: list[Any], engines: int, *ocr_args: str, example: str = "",
             example_out: Path | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Each page as a masking job through a gateway; the findings and timings."""
    import httpx

    from services.runtime.processes import start_redis, stop_process

    folder = Path(tempfile.mkdtemp(prefix="bench-masking-"))
    redis, redis_url = start_redis(folder)
    procs = []
    scores: list[dict] = []
    job_s: list[float] = []
    repeat_s: list[float] = []
    extract_first: list[float] = []
    extract_repeat: list[float] = []
    try:
        ocr, ocr_port = start_service("services.ocr", "--redis-url", redis_url, "--engines", str(engines), *ocr_args)
        procs.append(ocr)
        gw, gw_port = start_service("gateway", "--ocr-target", f"127.0.0.1:{ocr_port}")
        procs.append(gw)
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=60) as http:
            def job(data: str) -> tuple[dict, float]:
                t = time.perf_counter()
                r = http.post("/v1/masking/jobs", json={"documents": [{"content_base64": data}], "masked_png": True})
                r.raise_for_status()
                where = r.headers["Location"]
                while True:
                    body = http.get(where).json()
                    if body["state"] in ("succeeded", "failed"):
                        break
                    time.sleep(0.01)
                assert body["state"] == "succeeded", body
                page = body["result"]["pages"][0]
                shot = http.get(page["png_url"])
                shot.raise_for_status()
                page["_png"] = shot.content
                return page, time.perf_counter() - t

            crop = samples[0].image.crop((0, 0, samples[0].image.width, samples[0].image.height // 2))
            buf = io.BytesIO()
            crop.save(buf, format="PNG")
            warm = base64.b64encode(buf.getvalue()).decode()
            job(warm)  # the first job loads what the workers load lazily; its reading is forgotten below
            http.post("/v1/ocr:extract", json={"content_base64": warm, "deskew": False}).raise_for_status()
            for s in samples:
                data = base64.b64encode(s.png()).decode()
                page, took = job(data)
                if s.name == example and example_out is not None:
                    save_example(s.name, s.image, page["_png"], example_out)
                found = [(tuple(e["box"]), [tuple(m) for m in e["masked"]]) for e in page["entities"]]
                scores.append(score_page(s.entities, found, s.image.size))  # type: ignore[arg-type]
                scores[-1]["pictures"] = [(p["kind"], tuple(p["box"])) for p in page.get("pictures", [])]
                job_s.append(took)
                again, took = job(data)
                assert again["cached"], "the repeated upload was read again"
                repeat_s.append(took)
                # One read and its repeat through /v1/ocr:extract (other options than the job: not cached yet).
                for times in (extract_first, extract_repeat):
                    t = time.perf_counter()
                    r = http.post("/v1/ocr:extract", json={"content_base64": data, "vlm_fallback": False})
                    r.raise_for_status()
                    times.append(time.perf_counter() - t)
    finally:
        for p in procs:
            stop_service(p)
        stop_process(redis)
        shutil.rmtree(folder, ignore_errors=True)
    return scores, {"job_s": job_s, "repeat_s": repeat_s, "extract_first_s": extract_first,
                    "extract_repeat_s": extract_repeat}


class _PatternAnalyzer:
    """presidio-analyzer's Korean-capable pattern recognizers behind AnalyzerEngine's ``analyze``."""

    def __init__(self) -> None:
        from bench.pii_text import presidio_recognizers

        self.recognizers = presidio_recognizers()

    def analyze(self, text: str, language: str = "ko", **_: Any) -> list[Any]:
        out: list[Any] = []
        for r in self.recognizers:
            out += r.analyze(text, r.supported_entities, None) or []
        return out


def run_presidio(samples: list[MaskingSample]) -> tuple[list[dict], list[float]]:
    """Presidio's image analyser on every page; its findings scored like the mesh's."""
    from presidio_image_redactor import ImageAnalyzerEngine, TesseractOCR

    engine = ImageAnalyzerEngine(analyzer_engine=_PatternAnalyzer(), ocr=TesseractOCR())  # type: ignore[arg-type]
    scores, times = [], []
    for s in samples:
        t = time.perf_counter()
        results = engine.analyze(s.image, ocr_kwargs={"lang": "kor+eng"}, language="ko")
        times.append(time.perf_counter() - t)
        by_entity: dict[tuple[int, int], list[Box]] = {}
        for r in results:
            by_entity.setdefault((r.start, r.end), []).append((r.left, r.top, r.width, r.height))
        found = []
        for boxes in by_entity.values():
            left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
            right, bottom = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
            found.append(((left, top, right - left, bottom - top), boxes))
        scores.append(score_page(s.entities, found, s.image.size))
    return scores, times


def summary(scores: list[dict]) -> dict[str, Any]:
    """Recall, IoU ≥ 0.8 share, stray masks share over some pages."""
    gold = sum(s["gold"] for s in scores)
    found = sum(s["found"] for s in scores)
    ious = [i for s in scores for i in s["ious"]]
    masks = sum(s["masks"] for s in scores)
    stray = sum(s["stray"] for s in scores)
    return {"gold": gold, "found": found, "recall": found / max(1, gold),
            "iou_08": sum(i >= 0.8 for i in ious) / max(1, len(ious)), "iou_median": statistics.median(ious or [0]),
            "masks": masks, "stray": stray, "stray_share": stray / max(1, masks)}


def main() -> None:
    """Both on one split; bench/results/masking.{md,json} (``--split tune``: masking_tune)."""
    parser = argparse.ArgumentParser(prog="python -m bench.masking", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("tune", "report", "fresh"), default="report")
    parser.add_argument("--per-condition", type=int, default=8)
    parser.add_argument("--engines", type=int, default=2, help="the OCR service's Tesseract engines")
    parser.add_argument("--no-presidio", action="store_true")
    parser.add_argument("--no-fit", action="store_true", help="OCR's boxes as read (the OCR service's --no-fit-masks)")
    parser.add_argument("--example", default="", help="a picture page's name (e.g. clean-photo-00) to save before "
                                                        "and after masking into docs/screenshots/")
    parser.add_argument("--pictures", type=int, default=7, help="pages per condition of bench/picture_set.py")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    samples = build(args.split, args.per_condition)
    with_pictures = build_pictures(args.split, args.pictures) if args.pictures else []
    mesh, timing = run_mesh(samples + with_pictures, args.engines,  # type: ignore[operator]
                            *(["--no-fit-masks"] if args.no_fit else []), example=args.example,
                            example_out=ROOT / "docs" / "screenshots")
    picture_scores, mesh = mesh[len(samples):], mesh[:len(samples)]
    picture_time = timing["job_s"][len(samples):]
    timing = {k: v[:len(samples)] for k, v in timing.items()}
    pres, p_times = run_presidio(samples) if not args.no_presidio else ([], [])
    rows: list[list[str]] = []
    per: dict[str, Any] = {}
    for condition in CONDITIONS:
        idx = [i for i, s in enumerate(samples) if s.condition == condition]
        m = summary([mesh[i] for i in idx])
        p = summary([pres[i] for i in idx]) if pres else None
        per[condition] = {"mesh": m, "presidio": p}
        rows.append([condition, str(len(idx)), str(m["gold"]), f"{m['recall']:.1%}", f"{m['iou_08']:.1%}",
                     f"{m['stray_share']:.1%} ({m['stray']}/{m['masks']})",
                     f"{p['recall']:.1%}" if p else "-", f"{p['iou_08']:.1%}" if p else "-",
                     f"{p['stray_share']:.1%} ({p['stray']}/{p['masks']})" if p else "-"])
    total_m = summary(mesh)
    total_p = summary(pres) if pres else None
    rows.append(["**all**", str(len(samples)), str(total_m["gold"]), f"**{total_m['recall']:.1%}**",
                 f"{total_m['iou_08']:.1%}", f"{total_m['stray_share']:.1%}",
                 f"{total_p['recall']:.1%}" if total_p else "-", f"{total_p['iou_08']:.1%}" if total_p else "-",
                 f"{total_p['stray_share']:.1%}" if total_p else "-"])
    kinds: dict[str, list[int]] = {}
    for s in mesh:
        for k, (g, f) in s["kinds"].items():
            kinds.setdefault(k, [0, 0])
            kinds[k][0] += g
            kinds[k][1] += f
    p50 = statistics.median(timing["job_s"])
    rep = statistics.median(timing["repeat_s"])
    ef, er = statistics.median(timing["extract_first_s"]), statistics.median(timing["extract_repeat_s"])
    body = [
        f"- Split **{args.split}** (seed of bench/masking_set.py): {args.per_condition} pages per condition, "
        f"{len(samples)} pages, {total_m['gold']} pieces of personal data with their ink boxes; 1,240-pixel-wide "
        "pages (A4 at 150 dpi) in four layouts (form, prose, header block, table) with look-alike distractors.",
        f"- Mesh: a masking job per page through the gateway (`masked_png: true`), OCR service with {args.engines} "
        "Tesseract engines, processes on loopback. Presidio: presidio-image-redactor's ImageAnalyzerEngine with "
        "TesseractOCR (`lang=kor+eng`) and presidio-analyzer's Korean-capable pattern recognizers.",
        "- Found: masked boxes cover ≥ 60 % of the entity's ink box; IoU ≥ 0.8: share of found entities whose "
        "best finding box has IoU ≥ 0.8; stray: masked boxes overlapping no entity by ≥ 10 % of their area.",
        "",
        md_table(["condition", "pages", "entities", "mesh recall", "mesh IoU ≥ 0.8", "mesh stray masks",
                  "Presidio recall", "Presidio IoU ≥ 0.8", "Presidio stray masks"], rows),
        "",
        "Mesh recall per kind: " + ", ".join(f"{k} {f}/{g}" for k, (g, f) in sorted(kinds.items())) + ".",
        "",
        md_table(["timing (this machine)", "p50 s", "p95 s"], [
            ["masking job per page, submit → masked PNG in hand (first read)", f"{p50:.2f}",
             f"{sorted(timing['job_s'])[int(0.95 * (len(samples) - 1))]:.2f}"],
            ["the same upload again (OCR cache)", f"{rep:.3f}",
             f"{sorted(timing['repeat_s'])[int(0.95 * (len(samples) - 1))]:.3f}"],
            ["`/v1/ocr:extract`, first read", f"{ef:.3f}", ""],
            [f"`/v1/ocr:extract`, repeated upload (cache): **{ef / er:.0f}x** faster", f"{er:.3f}", ""],
            ["Presidio image analyser per page (in process, pytesseract)",
             f"{statistics.median(p_times):.2f}" if p_times else "-", ""],
        ]),
    ]
    pics = score_pictures(with_pictures, picture_scores) if with_pictures else None
    if pics is not None:
        prow = []
        for condition in CONDITIONS:
            idx = [i for i, s in enumerate(with_pictures) if s.condition == condition]
            c = score_pictures([with_pictures[i] for i in idx], [picture_scores[i] for i in idx])
            prow.append([condition, f"{c['photos_masked']}/{c['photos']}", f"{c['others_masked']}/{c['others']}",
                         str(c["stray"])])
        prow.append(["**all**", f"**{pics['photos_masked']}/{pics['photos']}** ({pics['recall']:.1%})",
                     f"{pics['others_masked']}/{pics['others']} ({pics['others_share']:.1%})", str(pics["stray"])])
        body += ["", f"Photos (bench/picture_set.py, split {args.split}, {args.pictures} pages per condition: "
                 "ID photos cut from matplotlib's sample pictures or drawn, logos, charts, signatures and pages "
                 "without a picture under a résumé header; masked when ≥ 90 % of a photo's box is under the "
                 "page's picture findings, a logo, chart or signature masked when ≥ 10 % of it is):", "",
                 md_table(["condition", "photos masked", "logos, charts, signatures masked",
                           "picture findings on no photo"], prow), "",
                 "By kind (masked / on the pages): " + ", ".join(f"{k} {m}/{n}" for k, (n, m) in
                                                                 sorted(pics["by_kind"].items())) + ".",
                 f"Masking job per page with a picture, p50: {statistics.median(picture_time):.2f} s."]
    name = "masking" if args.split == "report" else f"masking_{args.split}"
    print(write_result(name, "Personal data on résumé images", body, {
        "split": args.split, "per_condition": args.per_condition, "conditions": per, "mesh": total_m,
        "presidio": total_p, "kinds": kinds, "timing": timing, "presidio_s": p_times, "pictures": pics,
        "picture_job_s": picture_time}, out=args.out))


if __name__ == "__main__":
    main()
