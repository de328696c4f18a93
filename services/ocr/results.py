"""Page results as JSON (job results and the OCR cache keep them in Redis)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from services.ocr.engine import Line, Word
from services.ocr.extractor import PageResult


def _box(raw: Any) -> tuple[int, int, int, int] | None:
    return None if raw is None else (int(raw[0]), int(raw[1]), int(raw[2]), int(raw[3]))


def page_from_dict(data: dict[str, Any]) -> PageResult:
    """A page result from :func:`dataclasses.asdict` output (lists where tuples were)."""
    data = dict(data)
    data["lines"] = [Line(ln["text"], ln["confidence"], _box(ln["box"]),  # type: ignore[arg-type]
                          words=[Word(w["text"], w["confidence"], _box(w["box"]),  # type: ignore[arg-type]
                                      [_box(c) for c in w.get("chars", [])])  # type: ignore[misc]
                                 for w in ln.get("words", [])],
                          image_box=_box(ln.get("image_box")))
                     for ln in data["lines"]]
    data["ocr_size"] = tuple(data["ocr_size"])
    data["image_size"] = tuple(data.get("image_size", (0, 0)))
    return PageResult(**data)


def page_to_json(page: PageResult) -> str:
    """Serialise a page result."""
    return json.dumps(asdict(page), ensure_ascii=False)


def page_from_json(raw: str | bytes) -> PageResult:
    """Parse a page result."""
    return page_from_dict(json.loads(raw))
