"""Proto <-> domain translation for the retrieval service."""

from __future__ import annotations

from google.protobuf import json_format, struct_pb2
from mesh.retrieval.v1 import retrieval_pb2 as pb

from services.bootstrap.errors import InvalidInput, Violation
from services.retrieval.fusion import ScoredDoc
from services.retrieval.query import Condition, Document, Filter, SearchQuery
from services.retrieval.store import CatalogMeta

FIELD_TYPE_TO_NAME = {pb.FIELD_TYPE_KEYWORD: "keyword", pb.FIELD_TYPE_INTEGER: "integer",
                      pb.FIELD_TYPE_FLOAT: "float", pb.FIELD_TYPE_BOOL: "bool"}
NAME_TO_FIELD_TYPE = {v: k for k, v in FIELD_TYPE_TO_NAME.items()}
MODE_TO_NAME = {pb.SEARCH_MODE_HYBRID: "hybrid", pb.SEARCH_MODE_DENSE: "dense", pb.SEARCH_MODE_KEYWORD: "keyword"}
NAME_TO_MODE = {v: k for k, v in MODE_TO_NAME.items()}
FUSION_TO_NAME = {pb.FUSION_METHOD_RRF: "rrf", pb.FUSION_METHOD_DBSF: "dbsf", pb.FUSION_METHOD_WEIGHTED: "weighted",
                  pb.FUSION_METHOD_AUTO: "auto"}
NAME_TO_FUSION = {v: k for k, v in FUSION_TO_NAME.items()}
GROUP_BY_TO_NAME = {pb.GROUP_BY_UNSPECIFIED: "document", pb.GROUP_BY_DOCUMENT: "document",
                    pb.GROUP_BY_PASSAGE: "passage"}
NAME_TO_GROUP_BY = {"document": pb.GROUP_BY_DOCUMENT, "passage": pb.GROUP_BY_PASSAGE}


def fields_from_proto(fields) -> dict[str, str]:
    """Declared fields; an unknown type is a field violation."""
    bad = [Violation(f"fields[{i}].type", "must be KEYWORD, INTEGER, FLOAT or BOOL")
           for i, f in enumerate(fields) if f.type not in FIELD_TYPE_TO_NAME]
    names = [f.name for f in fields]
    bad += [Violation("fields", f"duplicate field {n!r}") for n in set(names) if names.count(n) > 1]
    if bad:
        raise InvalidInput("invalid payload fields", bad)
    return {f.name: FIELD_TYPE_TO_NAME[f.type] for f in fields}


def collection_info(meta: CatalogMeta, count: int) -> pb.CollectionInfo:
    """CollectionInfo of a catalog."""
    return pb.CollectionInfo(
        name=meta.name, collection=meta.collection, documents=count, embedding_revision=meta.embedding_revision,
        tokenizer=meta.analyzer, layout=meta.layout,
        fields=[pb.PayloadField(name=n, type=NAME_TO_FIELD_TYPE[t]) for n, t in sorted(meta.fields.items())],
        previous_collection=(meta.previous or {}).get("collection", ""),
        previous_embedding_revision=(meta.previous or {}).get("embedding_revision", ""),
        rollback_until=float((meta.previous or {}).get("until", 0.0)))


def documents_from_proto(docs) -> list[Document]:
    """Documents with their payload as plain Python values."""
    return [Document(d.id, d.text, json_format.MessageToDict(d.payload) if d.HasField("payload") else {})
            for d in docs]


def _condition(c: pb.Condition) -> Condition:
    which = c.WhichOneof("test")
    if which == "range":
        r = c.range
        return Condition(c.field, gte=r.gte if r.HasField("gte") else None, lte=r.lte if r.HasField("lte") else None,
                         gt=r.gt if r.HasField("gt") else None, lt=r.lt if r.HasField("lt") else None)
    if which == "any_of":
        return Condition(c.field, any_of=tuple(c.any_of.values))
    if which == "keyword":
        return Condition(c.field, equals=c.keyword)
    if which == "integer":
        return Condition(c.field, equals=c.integer)
    if which == "flag":
        return Condition(c.field, equals=c.flag)
    return Condition(c.field)


def search_from_proto(req: pb.SearchRequest) -> tuple[SearchQuery, str | None, int | None, float | None]:
    """The domain query plus the fusion parameters the caller set (None = service default)."""
    if req.mode not in MODE_TO_NAME and req.mode != pb.SEARCH_MODE_UNSPECIFIED:
        raise InvalidInput("invalid search", [Violation("mode", "unknown search mode")])
    if req.fusion.method not in FUSION_TO_NAME and req.fusion.method != pb.FUSION_METHOD_UNSPECIFIED:
        raise InvalidInput("invalid search", [Violation("fusion.method", "unknown fusion method")])
    if req.group_by not in GROUP_BY_TO_NAME:
        raise InvalidInput("invalid search", [Violation("group_by", "unknown grouping")])
    mmr = req.mmr if req.HasField("mmr") else None
    q = SearchQuery(
        text=req.query,
        vector=list(req.query_vector) if len(req.query_vector) else None,
        vector_revision=req.query_vector_revision,
        filter=Filter(tuple(_condition(c) for c in req.filter.must), tuple(_condition(c) for c in req.filter.must_not)),
        top_k=req.top_k or 10,
        mode=MODE_TO_NAME.get(req.mode),
        score_threshold=req.score_threshold if req.HasField("score_threshold") else None,
        mmr_diversity=(mmr.diversity or 0.3) if mmr is not None else None,
        mmr_candidates=(mmr.candidates or None) if mmr is not None else None,
        group_by=GROUP_BY_TO_NAME[req.group_by],
    )
    fusion = FUSION_TO_NAME.get(req.fusion.method)
    weight = req.fusion.dense_weight if req.fusion.method == pb.FUSION_METHOD_WEIGHTED and req.fusion.dense_weight \
        else None
    return q, fusion, req.fusion.rrf_k or None, weight


def hit_to_proto(d: ScoredDoc) -> pb.Hit:
    """One hit with its per-leg ranks."""
    payload = struct_pb2.Struct()
    payload.update(d.payload)
    p = d.passage
    return pb.Hit(id=d.doc_id, score=d.score, text=d.text, payload=payload,
                  dense=pb.LegHit(rank=d.dense.rank, score=d.dense.score) if d.dense else pb.LegHit(),
                  keyword=pb.LegHit(rank=d.keyword.rank, score=d.keyword.score) if d.keyword else pb.LegHit(),
                  passage=pb.Passage(ordinal=p.ordinal, start=p.start, end=p.end, passages=p.passages, text=p.text)
                  if p is not None else None)
