"""Async client of mesh.retrieval.v1.RetrievalService: domain types in and out, every call with a deadline.

The enum maps between the contract's names (``hybrid``, ``keyword``, ``rrf`` …) and the proto live
here, once; callers never see a proto message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import grpc
from google.protobuf import json_format
from mesh.retrieval.v1 import retrieval_pb2 as pb
from mesh.retrieval.v1 import retrieval_pb2_grpc as pb_grpc

from clients.channels import aio_channel
from clients.errors import from_rpc_error
from clients.health import HealthCheck
from clients.retry import retry_options

# Reads, and writes that are idempotent by id; CreateCollection, DeleteCollection and Reindex are not retried.
_RETRY = retry_options("mesh.retrieval.v1.RetrievalService",
                       ["Search", "GetCollection", "ListCollections", "UpsertDocuments", "DeleteDocuments"])

DEFAULT_TIMEOUT_S = 5.0
# A search may return 100 hits of 20,000 characters each (up to ~6 MB of UTF-8, with payloads): gRPC's
# default 4 MiB receive limit would turn a valid large answer into RESOURCE_EXHAUSTED.
_LIMITS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]

Mode = Literal["hybrid", "dense", "keyword"]
FieldType = Literal["keyword", "integer", "float", "bool"]
FusionName = Literal["auto", "rrf", "dbsf", "weighted"]
GroupBy = Literal["document", "passage"]
MODES: dict[str, int] = {"hybrid": pb.SEARCH_MODE_HYBRID, "dense": pb.SEARCH_MODE_DENSE,
                         "keyword": pb.SEARCH_MODE_KEYWORD}
MODE_NAMES = {v: k for k, v in MODES.items()}
FIELD_TYPES: dict[str, int] = {"keyword": pb.FIELD_TYPE_KEYWORD, "integer": pb.FIELD_TYPE_INTEGER,
                               "float": pb.FIELD_TYPE_FLOAT, "bool": pb.FIELD_TYPE_BOOL}
FIELD_NAMES = {v: k for k, v in FIELD_TYPES.items()}
FUSIONS: dict[str, int] = {"auto": pb.FUSION_METHOD_AUTO, "rrf": pb.FUSION_METHOD_RRF,
                           "dbsf": pb.FUSION_METHOD_DBSF, "weighted": pb.FUSION_METHOD_WEIGHTED}
FUSION_NAMES = {v: k for k, v in FUSIONS.items()}
GROUP_BYS: dict[str, int] = {"document": pb.GROUP_BY_DOCUMENT, "passage": pb.GROUP_BY_PASSAGE}


@dataclass(frozen=True)
class Condition:
    """One test on a declared field: exactly one of ``eq``, ``any_of`` or range bounds."""

    field: str
    eq: str | int | bool | None = None
    any_of: Sequence[str] | None = None
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None

    def to_proto(self) -> pb.Condition:
        """The proto condition (the server checks the field's declared type)."""
        if self.any_of is not None:
            return pb.Condition(field=self.field, any_of=pb.KeywordSet(values=list(self.any_of)))
        if isinstance(self.eq, bool):
            return pb.Condition(field=self.field, flag=self.eq)
        if isinstance(self.eq, int):
            return pb.Condition(field=self.field, integer=self.eq)
        if self.eq is not None:
            return pb.Condition(field=self.field, keyword=self.eq)
        return pb.Condition(field=self.field, range=pb.Range(gte=self.gte, gt=self.gt, lte=self.lte, lt=self.lt))


@dataclass(frozen=True)
class Filter:
    """Documents pass when every ``must`` holds and no ``must_not`` does."""

    must: Sequence[Condition] = ()
    must_not: Sequence[Condition] = ()


@dataclass(frozen=True)
class FusionOptions:
    """How hybrid legs are combined; ``None`` everywhere means the service's defaults."""

    method: FusionName | None = None
    rrf_k: int | None = None
    dense_weight: float | None = None
    mmr_diversity: float | None = None
    mmr_candidates: int | None = None
    score_threshold: float | None = None


@dataclass(frozen=True)
class QueryVector:
    """A query vector and the embedding model revision that produced it (the service refuses a mismatch)."""

    values: Sequence[float]
    revision: str


@dataclass(frozen=True)
class Passage:
    """Where a hit's passage lies in its document's text (``passages`` 1: it is the whole document)."""

    ordinal: int
    start: int
    end: int
    passages: int
    text: str


@dataclass(frozen=True)
class Hit:
    """One result; ranks are 1-based per leg, None when the leg did not return it.

    ``passage``: the passage that matched (a document hit) or the passage the hit is (grouped by passage).
    """

    id: str
    score: float
    text: str
    payload: dict[str, Any]
    dense_rank: int | None
    keyword_rank: int | None
    dense_score: float | None = None  # the dense leg's cosine similarity, None when that leg did not return it
    keyword_score: float | None = None  # the keyword leg's BM25 score, likewise
    passage: Passage | None = None


@dataclass(frozen=True)
class SearchTimings:
    """Where a search's time went in the service, in nanoseconds (``embed_ns`` is 0 when a vector was given)."""

    embed_ns: int = 0
    tokenize_ns: int = 0
    search_ns: int = 0
    total_ns: int = 0


@dataclass(frozen=True)
class SearchResult:
    """Hits best first, with what actually ran and the service's own timings."""

    hits: list[Hit]
    mode: Mode
    degraded: bool
    fusion: FusionName | None
    fusion_reason: str
    timings: SearchTimings = field(default_factory=SearchTimings)


@dataclass(frozen=True)
class Collection:
    """A collection (alias) and what it holds."""

    name: str
    collection: str
    documents: int
    embedding_revision: str
    tokenizer: str
    fields: dict[str, FieldType]
    layout: str = "document"  # "document" (one point each) or "passages:<chars>/<overlap>"
    previous_collection: str = ""  # the version an upgrade replaced, kept for a rollback
    previous_embedding_revision: str = ""
    rollback_until: float = 0.0  # unix seconds; 0 when nothing is kept


@dataclass(frozen=True)
class Document:
    """A document to write."""

    id: str
    text: str
    payload: dict[str, Any] = field(default_factory=dict)

    def to_proto(self) -> pb.Document:
        """The proto document."""
        doc = pb.Document(id=self.id, text=self.text)
        doc.payload.update(self.payload)
        return doc


@dataclass(frozen=True)
class WriteTimings:
    """Where one written batch's time went in the service, in nanoseconds."""

    embed_ns: int = 0
    tokenize_ns: int = 0
    write_ns: int = 0


@dataclass(frozen=True)
class BatchWritten:
    """One batch of a bulk write: ``error`` is empty and ``timings`` set when it was written."""

    sequence: int
    error: str
    total_upserted: int
    timings: WriteTimings | None = None


@dataclass(frozen=True)
class WriteSummary:
    """The end of a bulk write (``total_ns``: the stream's wall time in the service)."""

    upserted: int
    batches: int
    failed_batches: int
    total_ns: int = 0


@dataclass(frozen=True)
class ReindexProgress:
    """Documents re-embedded so far."""

    done: int
    total: int


@dataclass(frozen=True)
class ReindexSummary:
    """The end of a reindex: the alias now points at ``collection`` (``total_ns``: its wall time in the service)."""

    previous_collection: str
    collection: str
    documents: int
    embedding_revision: str
    total_ns: int = 0
    layout: str = ""  # the layout the collection now has
    gate: GateResult | None = None  # the quality gate's figures, when one ran
    kept_collection: str = ""  # the replaced version, kept for a rollback until ``rollback_until``
    rollback_until: float = 0.0


@dataclass(frozen=True)
class GateQuery:
    """A judged query of a quality gate: its text and the ids of the documents relevant to it."""

    query: str
    relevant_ids: list[str]


@dataclass(frozen=True)
class GateResult:
    """Both versions' recall@10 and nDCG@10 on a gate's queries, and whether the swap may happen."""

    queries: int
    old_recall: float
    new_recall: float
    old_ndcg: float
    new_ndcg: float
    margin: float
    passed: bool
    old_revision: str
    new_revision: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able figures (rounded to 4 places)."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class EmbeddingRevision:
    """A model revision retrieval can embed with, and the instance serving it."""

    revision: str
    dim: int
    target: str


def gate_from_proto(g: pb.GateResult) -> GateResult:
    """A proto gate result as the domain type."""
    return GateResult(queries=g.queries, old_recall=g.old_recall, new_recall=g.new_recall, old_ndcg=g.old_ndcg,
                      new_ndcg=g.new_ndcg, margin=g.margin, passed=g.passed, old_revision=g.old_revision,
                      new_revision=g.new_revision)


def collection_from_proto(c: pb.CollectionInfo) -> Collection:
    """A proto collection as the domain type."""
    return Collection(name=c.name, collection=c.collection, documents=c.documents,
                      embedding_revision=c.embedding_revision, tokenizer=c.tokenizer, layout=c.layout or "document",
                      fields={f.name: FIELD_NAMES.get(f.type, "keyword") for f in c.fields},  # type: ignore[misc]
                      previous_collection=c.previous_collection,
                      previous_embedding_revision=c.previous_embedding_revision, rollback_until=c.rollback_until)


def _hit(h: pb.Hit) -> Hit:
    return Hit(id=h.id, score=h.score, text=h.text, payload=json_format.MessageToDict(h.payload),
               dense_rank=h.dense.rank or None, keyword_rank=h.keyword.rank or None,
               dense_score=h.dense.score if h.dense.rank else None,
               keyword_score=h.keyword.score if h.keyword.rank else None,
               passage=Passage(h.passage.ordinal, h.passage.start, h.passage.end, h.passage.passages, h.passage.text)
               if h.HasField("passage") else None)


def search_request(collection: str, query: str, *, top_k: int = 10, mode: Mode = "hybrid",
                   filter: Filter | None = None, vector: QueryVector | None = None,
                   fusion: FusionOptions | None = None, group_by: GroupBy = "document") -> pb.SearchRequest:
    """The proto request of :meth:`AsyncRetrievalClient.search`."""
    req = pb.SearchRequest(collection=collection, query=query, top_k=top_k, mode=MODES[mode],
                           group_by=GROUP_BYS[group_by])
    if filter is not None:
        req.filter.CopyFrom(pb.Filter(must=[c.to_proto() for c in filter.must],
                                      must_not=[c.to_proto() for c in filter.must_not]))
    if vector is not None:
        req.query_vector.extend(vector.values)
        req.query_vector_revision = vector.revision
    if fusion is not None:
        if fusion.method is not None:
            req.fusion.method = FUSIONS[fusion.method]  # type: ignore[assignment]
        if fusion.rrf_k is not None:
            req.fusion.rrf_k = fusion.rrf_k
        if fusion.dense_weight is not None:
            req.fusion.dense_weight = fusion.dense_weight
        if fusion.mmr_diversity is not None:
            req.mmr.diversity = fusion.mmr_diversity
        if fusion.mmr_candidates is not None:
            req.mmr.candidates = fusion.mmr_candidates
        if fusion.score_threshold is not None:
            req.score_threshold = fusion.score_threshold
    return req


class AsyncRetrievalClient(HealthCheck):
    """grpc.aio client; domain types in and out, failures as :class:`clients.errors.MeshClientError`."""

    def __init__(self, target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 channel: grpc.aio.Channel | None = None) -> None:
        self.timeout_s = timeout_s
        self._channel = channel or aio_channel(target, options=[*_RETRY, *_LIMITS])
        self._stub = pb_grpc.RetrievalServiceStub(self._channel)

    async def _call(self, method, request, timeout_s: float | None):
        try:
            return await method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def _stream(self, call) -> AsyncIterator:
        try:
            async for event in call:
                yield event
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()  # no-op when finished; cancels the RPC when the consumer left early

    async def search(self, collection: str, query: str, *, top_k: int = 10, mode: Mode = "hybrid",
                     filter: Filter | None = None, vector: QueryVector | None = None,
                     fusion: FusionOptions | None = None, timeout_s: float | None = None,
                     group_by: GroupBy = "document") -> SearchResult:
        """Search a collection (``vector`` skips the service's own embedding call).

        ``group_by="passage"``: every matching passage of a collection of passages is its own hit.
        """
        req = search_request(collection, query, top_k=top_k, mode=mode, filter=filter, vector=vector, fusion=fusion,
                             group_by=group_by)
        resp = await self._call(self._stub.Search, req, timeout_s)
        t = resp.timings
        return SearchResult(hits=[_hit(h) for h in resp.hits], mode=MODE_NAMES[resp.mode],  # type: ignore[arg-type]
                            degraded=resp.degraded, fusion=FUSION_NAMES.get(resp.fusion),  # type: ignore[arg-type]
                            fusion_reason=resp.fusion_reason,
                            timings=SearchTimings(embed_ns=t.embed_ns, tokenize_ns=t.tokenize_ns,
                                                  search_ns=t.search_ns, total_ns=t.total_ns))

    async def create_collection(self, name: str, fields: dict[str, FieldType],
                                timeout_s: float | None = None) -> Collection:
        """Create a collection with its filterable fields."""
        req = pb.CreateCollectionRequest(name=name, fields=[pb.PayloadField(name=n, type=FIELD_TYPES[t])  # type: ignore[arg-type]
                                                            for n, t in fields.items()])
        return collection_from_proto((await self._call(self._stub.CreateCollection, req, timeout_s)).collection)

    async def get_collection(self, name: str, timeout_s: float | None = None) -> Collection:
        """Describe a collection."""
        resp = await self._call(self._stub.GetCollection, pb.GetCollectionRequest(name=name), timeout_s)
        return collection_from_proto(resp.collection)

    async def list_collections(self, timeout_s: float | None = None) -> list[Collection]:
        """Every collection, by name."""
        resp = await self._call(self._stub.ListCollections, pb.ListCollectionsRequest(), timeout_s)
        return [collection_from_proto(c) for c in resp.collections]

    async def delete_collection(self, name: str, timeout_s: float | None = None) -> tuple[str, int]:
        """Remove a collection and its data; returns (versioned collection, documents it held)."""
        resp = await self._call(self._stub.DeleteCollection, pb.DeleteCollectionRequest(name=name), timeout_s)
        return resp.collection, resp.documents

    async def upsert(self, collection: str, documents: Iterable[Document], timeout_s: float | None = None) -> int:
        """Write one batch (all or nothing); returns how many were upserted."""
        req = pb.UpsertDocumentsRequest(collection=collection, documents=[d.to_proto() for d in documents])
        return (await self._call(self._stub.UpsertDocuments, req, timeout_s)).upserted

    async def delete(self, collection: str, ids: list[str], timeout_s: float | None = None) -> int:
        """Remove documents by id; returns how many ids were asked for."""
        req = pb.DeleteDocumentsRequest(collection=collection, ids=ids)
        return (await self._call(self._stub.DeleteDocuments, req, timeout_s)).requested

    async def upsert_stream(self, collection: str, batches: Iterable[Sequence[Document]],
                            timeout_s: float = 3600.0) -> AsyncIterator[BatchWritten | WriteSummary]:
        """Bulk write: one :class:`BatchWritten` per batch (a bad batch is refused alone), then the summary."""
        requests = (pb.UpsertDocumentsStreamRequest(collection=collection, documents=[d.to_proto() for d in b])
                    for b in batches)
        async for event in self._stream(self._stub.UpsertDocumentsStream(requests, timeout=timeout_s)):
            if event.HasField("progress"):
                p = event.progress
                r = p.response
                timings = (WriteTimings(embed_ns=r.embed_ns, tokenize_ns=r.tokenize_ns, write_ns=r.write_ns)
                           if p.HasField("response") else None)
                yield BatchWritten(sequence=p.sequence, error=p.error, total_upserted=p.total_upserted,
                                   timings=timings)
            else:
                s = event.summary
                yield WriteSummary(upserted=s.upserted, batches=s.batches, failed_batches=s.failed_batches,
                                   total_ns=s.total_ns)

    async def reindex(self, collection: str, batch_size: int = 64, timeout_s: float = 3600.0, *,
                      embedding_revision: str = "", gate: list[GateQuery] | None = None,
                      margin: float | None = None, gate_mode: Mode = "dense", grace_s: float = 0.0,
                      validate_only: bool = False,
                      ) -> AsyncIterator[ReindexProgress | ReindexSummary | GateResult]:
        """Rebuild and swap; yields progress, the gate's figures when one runs, then the summary.

        With ``embedding_revision`` it is an upgrade to that model revision; ``gate`` (judged queries)
        then decides the swap, and a refusal ends the stream with
        :class:`clients.errors.FailedPrecondition` after the :class:`GateResult`. ``validate_only``
        checks the request and yields nothing.
        """
        req = pb.ReindexRequest(collection=collection, batch_size=batch_size, embedding_revision=embedding_revision,
                                validate_only=validate_only, grace_s=grace_s)
        if gate:
            req.gate.queries.extend(pb.GateQuery(query=q.query, relevant_ids=q.relevant_ids) for q in gate)
            req.gate.mode = MODES[gate_mode]  # type: ignore[assignment]
            if margin is not None:
                req.gate.margin = margin
        call = self._stub.Reindex(req, timeout=timeout_s)
        async for event in self._stream(call):
            kind = event.WhichOneof("event")
            if kind == "progress":
                yield ReindexProgress(done=event.progress.done, total=event.progress.total)
            elif kind == "gate":
                yield gate_from_proto(event.gate)
            else:
                s = event.summary
                yield ReindexSummary(previous_collection=s.previous_collection, collection=s.collection,
                                     documents=s.documents, embedding_revision=s.embedding_revision,
                                     total_ns=s.total_ns, layout=s.layout,
                                     gate=gate_from_proto(s.gate) if s.HasField("gate") else None,
                                     kept_collection=s.kept_collection, rollback_until=s.rollback_until)

    async def rollback(self, name: str, timeout_s: float | None = None) -> tuple[Collection, str]:
        """Point ``name`` back at the version its last upgrade replaced: (what serves now, the removed version)."""
        resp = await self._call(self._stub.Rollback, pb.RollbackRequest(name=name), timeout_s)
        return collection_from_proto(resp.collection), resp.removed_collection

    async def list_revisions(self, timeout_s: float | None = None) -> list[EmbeddingRevision]:
        """The embedding revisions retrieval can embed with (the first: new collections')."""
        resp = await self._call(self._stub.ListRevisions, pb.ListRevisionsRequest(), timeout_s)
        return [EmbeddingRevision(r.revision, r.dim, r.target) for r in resp.revisions]

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncRetrievalClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
