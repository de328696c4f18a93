"""Search and document types of the retrieval domain (no gRPC, no Qdrant), with their validation."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from services.bootstrap.errors import InvalidInput, Violation

FIELD_TYPES = ("keyword", "integer", "float", "bool")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
FIELD_RE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
MAX_TOP_K = 100
MAX_BATCH = 256
MAX_TEXT_CHARS = 20000  # a query
MAX_DOCUMENT_CHARS = 500_000  # a document (a file's text: ~250 pages); cut into passages, its whole text on the first
MODES = ("hybrid", "dense", "keyword")
FUSIONS = ("auto", "rrf", "dbsf", "weighted")
GROUPINGS = ("document", "passage")


@dataclass(frozen=True)
class Condition:
    """One filter test on a declared field: equals, any-of, or a numeric range."""

    field: str
    equals: Any = None
    any_of: tuple[str, ...] | None = None
    gte: float | None = None
    lte: float | None = None
    gt: float | None = None
    lt: float | None = None

    @property
    def is_range(self) -> bool:
        """True for a range test."""
        return any(v is not None for v in (self.gte, self.lte, self.gt, self.lt))


@dataclass(frozen=True)
class Filter:
    """Documents pass when every ``must`` holds and no ``must_not`` does."""

    must: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()


@dataclass
class SearchQuery:
    """A validated search."""

    text: str
    vector: list[float] | None = None
    vector_revision: str = ""  # the embedding revision that made ``vector``; required with it
    filter: Filter = field(default_factory=Filter)
    top_k: int = 10
    mode: str | None = None  # None: hybrid when a vector can be had
    fusion: str = "auto"
    rrf_k: int = 60
    dense_weight: float = 0.5
    score_threshold: float | None = None
    mmr_diversity: float | None = None
    mmr_candidates: int | None = None
    group_by: str = "document"  # one hit per document (its best passage), or "passage": every passage


@dataclass
class Document:
    """A document to write."""

    id: str
    text: str
    payload: dict[str, Any] = field(default_factory=dict)


def check_name(name: str, what: str = "collection") -> None:
    """Collection names: lower-case letters, digits, ``_`` and ``-``, up to 64."""
    if not NAME_RE.match(name or ""):
        raise InvalidInput(f"invalid {what} name {name!r}", [Violation(what, "must match [a-z0-9][a-z0-9_-]{0,63}")])


MAX_FIELDS = 64  # each field is an index built on the one database thread: a bound on work per request


def check_fields(fields: dict[str, str]) -> None:
    """Declared payload fields: at most ``MAX_FIELDS``, valid names and known types."""
    if len(fields) > MAX_FIELDS:
        raise InvalidInput("too many payload fields", [Violation("fields", f"at most {MAX_FIELDS} fields")])
    bad = [Violation(f"fields[{n}]", "name must match [a-z_][a-z0-9_]*") for n in fields if not FIELD_RE.match(n)]
    bad += [Violation(f"fields[{n}]", f"type must be one of {FIELD_TYPES}") for n, t in fields.items()
            if t not in FIELD_TYPES]
    if bad:
        raise InvalidInput("invalid payload fields", bad)


MAX_KEYWORDS = 100  # values of one keyword field of one document (a list: tags)


def _type_ok(ftype: str, value: Any) -> bool:
    if ftype == "keyword":
        return isinstance(value, str)
    if ftype == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if ftype == "integer":
        return float(value).is_integer()
    return math.isfinite(float(value))


def coerce_payload(payload: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """Integers arrive as floats from protobuf Struct; store declared integers as int."""
    out = dict(payload)
    for name, ftype in fields.items():
        if ftype == "integer" and isinstance(out.get(name), float):
            out[name] = int(out[name])
    return out


def validate_documents(docs: list[Document], fields: dict[str, str]) -> None:
    """Every problem of a batch at once; nothing is written when any is found.

    Rules: 1..256 documents, each with a non-blank id and text (≤ 20,000 characters); ids unique
    within the batch (a repeated id is an error, not last-wins, so nothing is silently dropped);
    declared payload fields must have their declared type (a keyword field may hold a list of up to
    ``MAX_KEYWORDS`` strings: ``eq`` and ``any_of`` then match any of them).
    """
    bad: list[Violation] = []
    if not docs:
        bad.append(Violation("documents", "at least one document is required"))
    elif len(docs) > MAX_BATCH:
        bad.append(Violation("documents", f"{len(docs)} documents; at most {MAX_BATCH} per batch"))
    seen: dict[str, int] = {}
    for i, d in enumerate(docs[:MAX_BATCH]):
        if not d.id.strip():
            bad.append(Violation(f"documents[{i}].id", "required"))
        elif d.id in seen:
            bad.append(Violation(f"documents[{i}].id", f"duplicate of documents[{seen[d.id]}].id"))
        else:
            seen[d.id] = i
        if not d.text.strip():
            bad.append(Violation(f"documents[{i}].text", "empty or whitespace-only"))
        elif len(d.text) > MAX_DOCUMENT_CHARS:
            bad.append(Violation(f"documents[{i}].text", f"{len(d.text)} characters; at most {MAX_DOCUMENT_CHARS}"))
        for name, ftype in fields.items():
            value = d.payload.get(name)
            if value is None or _type_ok(ftype, value):
                continue
            if ftype == "keyword" and isinstance(value, list):  # tags: a filter matches any of them
                if len(value) > MAX_KEYWORDS or not all(isinstance(v, str) for v in value):
                    bad.append(Violation(f"documents[{i}].payload.{name}",
                                         f"a keyword list holds at most {MAX_KEYWORDS} strings"))
                continue
            bad.append(Violation(f"documents[{i}].payload.{name}", f"must be {ftype}"
                                 + (" or a list of strings" if ftype == "keyword" else "")))
    if bad:
        raise InvalidInput(f"{len(bad)} problem(s) in the batch; nothing was written", bad)


def validate_search(q: SearchQuery, fields: dict[str, str], dim: int, embedding_revision: str = "") -> None:
    """Every problem of a search at once (``embedding_revision``: the collection's, named in messages)."""
    bad: list[Violation] = []
    if not q.text.strip():
        bad.append(Violation("query", "empty or whitespace-only"))
    elif len(q.text) > MAX_TEXT_CHARS:
        bad.append(Violation("query", f"at most {MAX_TEXT_CHARS} characters"))
    if not 1 <= q.top_k <= MAX_TOP_K:
        bad.append(Violation("top_k", f"must be between 1 and {MAX_TOP_K}"))
    if q.vector is not None:
        if len(q.vector) != dim:
            bad.append(Violation("query_vector", f"has {len(q.vector)} dimensions; the collection has {dim}"))
        elif not all(math.isfinite(v) for v in q.vector) or not any(q.vector):
            bad.append(Violation("query_vector", "must be finite and non-zero"))
        if not q.vector_revision.strip():
            bad.append(Violation("query_vector_revision", "required with query_vector: the embedding model "
                                 "revision that produced it (empty given; the collection holds vectors of "
                                 f"revision {embedding_revision or 'see GetCollection'})"))
    if q.mode is not None and q.mode not in MODES:
        bad.append(Violation("mode", f"must be one of {MODES}"))
    if q.fusion not in FUSIONS:
        bad.append(Violation("fusion.method", f"must be one of {FUSIONS}"))
    if q.rrf_k < 1:
        bad.append(Violation("fusion.rrf_k", "must be at least 1"))
    if not 0.0 <= q.dense_weight <= 1.0:
        bad.append(Violation("fusion.dense_weight", "must be in [0, 1]"))
    if q.mmr_diversity is not None and not 0.0 <= q.mmr_diversity <= 1.0:
        bad.append(Violation("mmr.diversity", "must be in [0, 1]"))
    if q.group_by not in GROUPINGS:
        bad.append(Violation("group_by", f"must be one of {GROUPINGS}"))
    if q.mmr_candidates is not None and not q.top_k <= q.mmr_candidates <= 1000:
        bad.append(Violation("mmr.candidates", "must be between top_k and 1000"))
    for where, conds in (("filter.must", q.filter.must), ("filter.must_not", q.filter.must_not)):
        for i, c in enumerate(conds):
            path = f"{where}[{i}]"
            ftype = fields.get(c.field)
            if ftype is None:
                bad.append(Violation(f"{path}.field", f"unknown field {c.field!r}; declared: {sorted(fields)}"))
            elif c.is_range:
                if ftype not in ("integer", "float"):
                    bad.append(Violation(path, f"range needs an integer or float field; {c.field} is {ftype}"))
            elif c.any_of is not None:
                if ftype != "keyword":
                    bad.append(Violation(path, f"any_of needs a keyword field; {c.field} is {ftype}"))
                elif not c.any_of:
                    bad.append(Violation(path, "any_of needs at least one value"))
            elif c.equals is None:
                bad.append(Violation(path, "no test given"))
            elif not _type_ok(ftype, c.equals):
                bad.append(Violation(path, f"{c.field} is {ftype}; the test value does not match"))
    if bad:
        raise InvalidInput(f"invalid search: {bad[0].field}: {bad[0].description}", bad)
