"""Personal data in Korean text: the mesh's detector beside Presidio on the same pages, per kind.

    python -m bench.pii_text [--pages 160] [--split report]

Pages from bench/pii_set.py (résumé-like and business text in four layouts, every kind, look-alike
distractors, OCR confusions): seed 1 is the **tune** split, seed 2 the **report** split. A found
span matches a gold one of the same kind when it covers at least half of the gold characters and
lies mostly inside it; recall per kind, precision over every span found (spans on distractors or
plain text are false positives, counted separately by what they hit).

Presidio (``presidio-analyzer``, its best configuration that runs here: no NLP engine, since its
default engines load spaCy or transformers models from a hub) runs its pattern recognizers on the
same pages: its Korean ones (KR_RRN, KR_FRN, KR_PASSPORT, KR_DRIVER_LICENSE), phone numbers
(``phonenumbers`` with the KR region), e-mail, URL and credit card; it has none for Korean names,
addresses, bank accounts or dates of birth (its date recognizer finds every date; left out).
Speed: the detector's p50 per page in process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, md_table
from bench.pii_set import pages
from bench.report import write_result
from services.ocr.pii.detector import detect
from services.ocr.pii.recognizers import KINDS

SPLITS = {"tune": 1, "report": 2}
PRESIDIO_KINDS = {"KR_RRN": "resident_number", "KR_FRN": "alien_number", "KR_PASSPORT": "passport",
                  "KR_DRIVER_LICENSE": "driver_license", "PHONE_NUMBER": "phone", "EMAIL_ADDRESS": "email",
                  "URL": "url", "CREDIT_CARD": "card"}


def presidio_recognizers() -> list[Any]:
    """Presidio's pattern recognizers that apply to Korean text (no NLP engine: its engines load hub models)."""
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        KrDriverLicenseRecognizer,
        KrFrnRecognizer,
        KrPassportRecognizer,
        KrRrnRecognizer,
        PhoneRecognizer,
        UrlRecognizer,
    )

    return [KrRrnRecognizer(), KrFrnRecognizer(), KrPassportRecognizer(), KrDriverLicenseRecognizer(),
            PhoneRecognizer(supported_regions=("KR",), supported_language="ko"),
            EmailRecognizer(supported_language="ko"), UrlRecognizer(supported_language="ko"),
            CreditCardRecognizer(supported_language="ko")]


def presidio_detector() -> Any:
    """Presidio's pattern recognizers that apply to Korean text, as one ``text -> spans`` function."""
    recognizers = presidio_recognizers()

    def run(text: str) -> list[tuple[str, int, int]]:
        out = []
        for r in recognizers:
            for res in r.analyze(text, r.supported_entities, None) or []:  # type: ignore[arg-type]  # no NLP engine
                if res.entity_type in PRESIDIO_KINDS:  # Presidio's default threshold: 0
                    out.append((PRESIDIO_KINDS[res.entity_type], res.start, res.end))
        kept: list[tuple[str, int, int]] = []  # overlaps: the longer span
        for span in sorted(out, key=lambda s: -(s[2] - s[1])):
            if all(span[2] <= k[1] or span[1] >= k[2] for k in kept):
                kept.append(span)
        return kept

    return run


def rest_latency(texts: list[str]) -> tuple[float, float]:
    """p50 and p95 ms of ``POST /v1/pii:detect`` through a gateway and an OCR service started as processes."""
    import shutil
    import tempfile

    import httpx

    from bench.common import start_service, stop_service
    from services.runtime.processes import start_redis, stop_process

    folder = Path(tempfile.mkdtemp(prefix="bench-pii-"))
    redis, redis_url = start_redis(folder)
    procs = []
    try:
        ocr, ocr_port = start_service("services.ocr", "--redis-url", redis_url, "--engines", "1")
        procs.append(ocr)
        gw, gw_port = start_service("gateway", "--ocr-target", f"127.0.0.1:{ocr_port}")
        procs.append(gw)
        samples = []
        with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=30) as http:
            for i, text in enumerate([*texts[:10], *texts]):
                t = time.perf_counter()
                http.post("/v1/pii:detect", json={"text": text, "mask": True}).raise_for_status()
                if i >= 10:
                    samples.append((time.perf_counter() - t) * 1e3)
    finally:
        for p in procs:
            stop_service(p)
        stop_process(redis)
        shutil.rmtree(folder, ignore_errors=True)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def matches(found: tuple[str, int, int], gold: tuple[str, int, int]) -> bool:
    """Same kind, covering at least half of the gold span, and mostly inside it."""
    kind, s, e = found
    gk, gs, ge = gold
    overlap = min(e, ge) - max(s, gs)
    return kind == gk and overlap >= 0.5 * (ge - gs) and overlap >= 0.5 * (e - s)


def score(found_by_page: list[list[tuple[str, int, int]]], data: list) -> dict[str, Any]:
    """Per kind: gold count, found, recall; overall precision; false positives."""
    kinds: dict[str, dict[str, int]] = {k: {"gold": 0, "found": 0} for k in KINDS}
    tp = fp = 0
    for found, (_, gold) in zip(found_by_page, data, strict=True):
        for g in gold:
            kinds[g[0]]["gold"] += 1
            kinds[g[0]]["found"] += any(matches(f, g) for f in found)
        for f in found:
            if any(matches(f, g) for g in gold):
                tp += 1
            else:
                fp += 1
    return {"kinds": kinds, "precision": tp / (tp + fp) if tp + fp else 1.0, "false_positives": fp,
            "recall": sum(k["found"] for k in kinds.values()) / max(1, sum(k["gold"] for k in kinds.values()))}


def main() -> None:
    """Both detectors on one split; bench/results/pii_text.{md,json} (``--split tune``: pii_text_tune)."""
    parser = argparse.ArgumentParser(prog="python -m bench.pii_text", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=160)
    parser.add_argument("--split", choices=tuple(SPLITS), default="report")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--rest", type=int, default=100, help="requests through the gateway (0: none)")
    args = parser.parse_args()
    data = pages(SPLITS[args.split], args.pages)
    times = []
    mesh_found = []
    for text, _ in data:
        detect(text)  # warm
        t = time.perf_counter()
        spans = detect(text)
        times.append((time.perf_counter() - t) * 1e3)
        mesh_found.append([(s.kind, s.start, s.end) for s in spans])
    pages_of_1500 = ["\n".join(t for t, _ in data[i:i + 3]) for i in range(0, len(data) - 2, 3)]
    big = []
    for text in pages_of_1500:
        t = time.perf_counter()
        detect(text)
        big.append((time.perf_counter() - t) * 1e3)
    presidio = presidio_detector()
    p_times = []
    presidio_found = []
    for text, _ in data:
        t = time.perf_counter()
        presidio_found.append(presidio(text))
        p_times.append((time.perf_counter() - t) * 1e3)
    mesh, pres = score(mesh_found, data), score(presidio_found, data)
    rest = rest_latency(pages_of_1500[:args.rest]) if args.rest else None
    chars = statistics.median(len(t) for t, _ in data)
    fps = [(text[s:e], k) for (text, gold), found in zip(data, mesh_found, strict=True)
           for (k, s, e) in found if not any(matches((k, s, e), g) for g in gold)]
    misses = [(text[s:e], k) for (text, gold), found in zip(data, mesh_found, strict=True)
              for (k, s, e) in gold if not any(matches(f, (k, s, e)) for f in found)]
    rows = [[k, str(mesh["kinds"][k]["gold"]), f"{mesh['kinds'][k]['found'] / max(1, mesh['kinds'][k]['gold']):.1%}",
             f"{pres['kinds'][k]['found'] / max(1, pres['kinds'][k]['gold']):.1%}"]
            for k in KINDS if mesh["kinds"][k]["gold"]]
    body = [
        f"- Split **{args.split}** (seed {SPLITS[args.split]}): {len(data)} pages of bench/pii_set.py, median "
        f"{chars:,.0f} characters, {sum(len(g) for _, g in data)} entities of {len(rows)} kinds, and 4-7 distractors "
        "a page (business registration numbers, company lines, postal codes, periods, salaries, scores, versions, "
        "product and order codes, dates); 20 % of the numbers with an OCR confusion.",
        "- Presidio: presidio-analyzer's pattern recognizers that apply (Korean RRN, FRN, passport, driver's licence; "
        "phone with the KR region; e-mail, URL, credit card), no NLP engine (its engines load hub models), its "
        "default threshold (0: every result kept).",
        "",
        md_table(["kind", "entities", "mesh recall", "Presidio recall"], rows),
        "",
        md_table(["", "mesh", "Presidio"], [
            ["recall (all kinds)", f"{mesh['recall']:.1%}", f"{pres['recall']:.1%}"],
            ["precision", f"{mesh['precision']:.1%}", f"{pres['precision']:.1%}"],
            ["false positives", str(mesh["false_positives"]), str(pres["false_positives"])],
            ["p50 ms per page, in process", f"{statistics.median(times):.2f}", f"{statistics.median(p_times):.2f}"],
            [f"p50 ms per ~1,500 characters (3 pages, median {statistics.median(len(t) for t in pages_of_1500):,.0f})",
             f"{statistics.median(big):.2f}", ""],
            ["p50 / p95 ms per ~1,500 characters through REST (gateway + OCR service, processes, loopback)",
             f"{rest[0]:.2f} / {rest[1]:.2f}" if rest else "-", ""],
        ]),
        "",
        "Mesh false positives (text, kind), first 15: "
        + (", ".join(f"`{t}` {k}" for t, k in fps[:15]) or "none") + ".",
        "",
        "Mesh misses (text, kind), first 15: " + (", ".join(f"`{t}` {k}" for t, k in misses[:15]) or "none") + ".",
    ]
    name = "pii_text" if args.split == "report" else "pii_text_tune"
    print(write_result(name, "Personal data in Korean text", body, {
        "split": args.split, "pages": len(data), "mesh": mesh, "presidio": pres,
        "p50_ms": statistics.median(times), "presidio_p50_ms": statistics.median(p_times),
        "p50_ms_1500_chars": statistics.median(big), "rest_p50_p95_ms": rest,
        "false_positive_texts": fps[:50], "misses": misses[:50]}, out=args.out))


if __name__ == "__main__":
    main()
