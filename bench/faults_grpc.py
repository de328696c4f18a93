"""The gRPC half of the bad-input corpus: every method of the four services, streams included.

Through the generated stubs (empty requests, empty required fields, huge and non-finite values,
unknown enum values) and as raw bytes (garbage, invalid UTF-8 in a string field). Each call has a
deadline; an INTERNAL or UNKNOWN answer, or a call that runs into its deadline, is named.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf import struct_pb2
from mesh.embedding.v1 import embedding_pb2 as epb
from mesh.ocr.v1 import ocr_pb2 as opb
from mesh.reasoning.v1 import reasoning_pb2 as rpb
from mesh.retrieval.v1 import retrieval_pb2 as qpb

from bench.faults_corpus import SCRATCH, CorpusResult, png_bomb

GrpcCall = Callable[[grpc.Channel, float], None]


def _unary(service: str, method: str, raw: bytes) -> GrpcCall:
    """A unary call sending ``raw`` bytes as the request (for payloads the stubs cannot build)."""
    def call(channel: grpc.Channel, timeout: float) -> None:
        channel.unary_unary(f"/{service}/{method}", request_serializer=lambda b: b,
                            response_deserializer=lambda b: b)(raw, timeout=timeout)
    return call


def _stream_out(service: str, method: str, raw: bytes) -> GrpcCall:
    def call(channel: grpc.Channel, timeout: float) -> None:
        for _ in channel.unary_stream(f"/{service}/{method}", request_serializer=lambda b: b,
                                      response_deserializer=lambda b: b)(raw, timeout=timeout):
            pass
    return call


def _stream_both(service: str, method: str, raws: list[bytes]) -> GrpcCall:
    def call(channel: grpc.Channel, timeout: float) -> None:
        for _ in channel.stream_stream(f"/{service}/{method}", request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)(iter(raws), timeout=timeout):
            pass
    return call


def _payload(**values: Any) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(values)
    return s


GARBAGE = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
BAD_UTF8_FIELD1 = b"\x0a\x03\xed\xa0\x80"  # field 1 (a string in every request below) holding a lone surrogate
NAN_VECTOR = [math.nan] * 384


def grpc_cases(png: bytes) -> dict[str, list[tuple[str, str, GrpcCall]]]:
    """Bad calls per service: (method, what, call)."""
    e, q, r, o = ("mesh.embedding.v1.EmbeddingService", "mesh.retrieval.v1.RetrievalService",
                  "mesh.reasoning.v1.ReasoningService", "mesh.ocr.v1.OcrService")

    def msgs(service: str, method: str, *requests: Any) -> list[tuple[str, str, GrpcCall]]:
        out = [(method, "garbage bytes", _unary(service, method, GARBAGE)),
               (method, "invalid UTF-8", _unary(service, method, BAD_UTF8_FIELD1))]
        for i, req in enumerate(requests):
            out.append((method, f"#{i} {_brief(req)}", _unary(service, method, req.SerializeToString())))
        return out

    def streamed(service: str, method: str, *requests: Any) -> list[tuple[str, str, GrpcCall]]:
        out = [(method, "garbage bytes", _stream_out(service, method, GARBAGE)),
               (method, "invalid UTF-8", _stream_out(service, method, BAD_UTF8_FIELD1))]
        out += [(method, f"#{i} {_brief(req)}", _stream_out(service, method, req.SerializeToString()))
                for i, req in enumerate(requests)]
        return out

    def both(service: str, method: str, *streams: list[Any]) -> list[tuple[str, str, GrpcCall]]:
        out = [(method, "garbage bytes", _stream_both(service, method, [GARBAGE])),
               (method, "invalid UTF-8", _stream_both(service, method, [BAD_UTF8_FIELD1]))]
        out += [(method, f"#{i} {len(s)} messages", _stream_both(service, method, [m.SerializeToString() for m in s]))
                for i, s in enumerate(streams)]
        return out

    def doc(id_: str = "g1", text: str = "문서", **payload: Any) -> qpb.Document:
        return qpb.Document(id=id_, text=text, payload=_payload(**payload))

    opts = rpb.Options
    cases = {
        "embedding": [
            *msgs(e, "Embed", epb.EmbedRequest(), epb.EmbedRequest(texts=[""]),
                  epb.EmbedRequest(texts=["가" * 1_000_000]),
                  epb.EmbedRequest(texts=["가"] * 10_000), epb.EmbedRequest(texts=["가"], kind=99),
                  epb.EmbedRequest(texts=["가" * 3000], options=epb.EmbedOptions(strict_length=True))),
            *both(e, "EmbedStream", [epb.EmbedStreamRequest(batch_id="a", texts=[""]),
                                     epb.EmbedStreamRequest(batch_id="b", texts=["가"])],
                  [epb.EmbedStreamRequest(texts=["가"] * 5000)], []),
            *msgs(e, "Info", epb.InfoRequest()),
        ],
        "retrieval": [
            *msgs(q, "CreateCollection", qpb.CreateCollectionRequest(), qpb.CreateCollectionRequest(name="A" * 10_000),
                  qpb.CreateCollectionRequest(name=f"{SCRATCH}-g", fields=[
                      qpb.PayloadField(name=f"f{i}", type=qpb.FIELD_TYPE_KEYWORD) for i in range(5000)]),
                  qpb.CreateCollectionRequest(name=f"{SCRATCH}-g", fields=[qpb.PayloadField(name="", type=99)]),
                  qpb.CreateCollectionRequest(name=f"{SCRATCH}-g", fields=[
                      qpb.PayloadField(name="f", type=qpb.FIELD_TYPE_KEYWORD)] * 2)),
            *msgs(q, "GetCollection", qpb.GetCollectionRequest(), qpb.GetCollectionRequest(name="zz-none")),
            *msgs(q, "UpsertDocuments", qpb.UpsertDocumentsRequest(),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH, documents=[doc(id_="")]),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH, documents=[doc(n=math.nan)]),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH, documents=[doc(n=math.inf)]),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH, documents=[doc(text="")]),
                  qpb.UpsertDocumentsRequest(collection=SCRATCH, documents=[doc(text="가" * 1_000_000)]),
                  qpb.UpsertDocumentsRequest(collection="zz-none", documents=[doc()] * 2000)),
            *both(q, "UpsertDocumentsStream",
                  [qpb.UpsertDocumentsStreamRequest(collection=SCRATCH, documents=[doc(n=math.nan)]),
                   qpb.UpsertDocumentsStreamRequest(collection=SCRATCH, documents=[doc(id_="g2")])],
                  [qpb.UpsertDocumentsStreamRequest(collection="", documents=[doc()])],
                  [qpb.UpsertDocumentsStreamRequest(collection=SCRATCH, documents=[doc(id_="")]),
                   qpb.UpsertDocumentsStreamRequest(collection="zz-none", documents=[doc()])]),
            *msgs(q, "DeleteDocuments", qpb.DeleteDocumentsRequest(), qpb.DeleteDocumentsRequest(collection=SCRATCH),
                  qpb.DeleteDocumentsRequest(collection=SCRATCH, ids=[""] * 100_000)),
            *msgs(q, "Search", qpb.SearchRequest(), qpb.SearchRequest(collection=SCRATCH),
                  qpb.SearchRequest(collection=SCRATCH, query="책", top_k=-1),
                  qpb.SearchRequest(collection=SCRATCH, query="책", top_k=2**31 - 1),
                  qpb.SearchRequest(collection=SCRATCH, query_vector=NAN_VECTOR),
                  qpb.SearchRequest(collection=SCRATCH, query_vector=[0.1, 0.2, 0.3]),
                  qpb.SearchRequest(collection=SCRATCH, query="책", mode=99),
                  qpb.SearchRequest(collection=SCRATCH, query="책", fusion=qpb.Fusion(method=99, rrf_k=-5)),
                  qpb.SearchRequest(collection=SCRATCH, query="책", fusion=qpb.Fusion(
                      method=qpb.FUSION_METHOD_WEIGHTED, dense_weight=math.nan)),
                  qpb.SearchRequest(collection=SCRATCH, query="책", score_threshold=math.nan),
                  qpb.SearchRequest(collection=SCRATCH, query="책", mmr=qpb.Mmr(diversity=5, candidates=10**9)),
                  qpb.SearchRequest(collection=SCRATCH, query="책", filter=qpb.Filter(must=[qpb.Condition(
                      field="price", range=qpb.Range(gte=math.nan))])),
                  qpb.SearchRequest(collection=SCRATCH, query="책", filter=qpb.Filter(must=[qpb.Condition(
                      field="unknown", integer=2**62)])),
                  qpb.SearchRequest(collection=SCRATCH, query="가" * 1_000_000)),
            *streamed(q, "Reindex", qpb.ReindexRequest(), qpb.ReindexRequest(collection="zz-none"),
                      qpb.ReindexRequest(collection=SCRATCH, batch_size=-1)),
            *msgs(q, "ListCollections", qpb.ListCollectionsRequest()),
            *msgs(q, "DeleteCollection", qpb.DeleteCollectionRequest(), qpb.DeleteCollectionRequest(name="zz-none"),
                  qpb.DeleteCollectionRequest(name="A" * 10_000), qpb.DeleteCollectionRequest(name="../q")),
        ],
        "reasoning": [
            *streamed(r, "Generate", rpb.GenerateRequest(), rpb.GenerateRequest(prompt="가" * 1_000_000),
                      rpb.GenerateRequest(prompt="안녕", options=opts(max_tokens=-1)),
                      rpb.GenerateRequest(prompt="안녕", options=opts(max_tokens=10**9)),
                      rpb.GenerateRequest(prompt="안녕", options=opts(temperature=math.nan)),
                      rpb.GenerateRequest(prompt="안녕", options=opts(timeouts=rpb.Timeouts(
                          first_token_s=-1, generation_s=math.inf, total_s=math.nan))),
                      rpb.GenerateRequest(prompt="안녕", options=opts(json_schema="{")),
                      rpb.GenerateRequest(prompt="안녕", options=opts(json_schema="[" * 10_000 + "]" * 10_000))),
            *streamed(r, "Chat", rpb.ChatRequest(), rpb.ChatRequest(message="안녕", session_id=""),
                      rpb.ChatRequest(message="안녕", history=[rpb.Message(role=99, content="x")]),
                      rpb.ChatRequest(message="안녕", history=[rpb.Message(role=1, content="가" * 100)] * 10_000)),
            *msgs(r, "GenerateReasons", rpb.GenerateReasonsRequest(), rpb.GenerateReasonsRequest(query="선물"),
                  rpb.GenerateReasonsRequest(query="선물", items=[rpb.Item(id="")] * 10_000),
                  rpb.GenerateReasonsRequest(query="선물", items=[rpb.Item(id="a", title="가" * 1_000_000)])),
            *msgs(r, "GenerateReasonsBatch", rpb.GenerateReasonsBatchRequest(),
                  rpb.GenerateReasonsBatchRequest(requests=[rpb.GenerateReasonsRequest()] * 1000)),
            *streamed(r, "Complete", rpb.CompleteRequest(),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=99, content="x")]),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_TOOL, content="x",
                                                                    tool_call_id="none")]),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="가" * 100)] * 10_000),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="안녕")],
                                          tools=[rpb.Tool(name="../x", parameters_json="{")] * 40),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="안녕")],
                                          tool_choice=rpb.ToolChoice(mode=rpb.TOOL_CHOICE_MODE_NAMED, name="nope")),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="안녕")],
                                          response_format=rpb.ResponseFormat(
                                              type=rpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
                                              json_schema="[" * 10_000 + "]" * 10_000)),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="안녕")],
                                          options=opts(top_p=math.nan, stop=[""] * 10)),
                      rpb.CompleteRequest(messages=[rpb.ChatMessage(role=rpb.ROLE_USER, content="안녕")],
                                          tools=[rpb.Tool(name="f", parameters_json='{"maximum": NaN}')])),
            *msgs(r, "Summarize", rpb.SummarizeRequest(), rpb.SummarizeRequest(text="글", max_sentences=-1),
                  rpb.SummarizeRequest(text="글", max_sentences=10**6), rpb.SummarizeRequest(text="가" * 1_000_000)),
        ],
        "ocr": [
            *msgs(o, "Extract", opb.ExtractRequest(), opb.ExtractRequest(content=b"not an image"),
                  opb.ExtractRequest(content=png_bomb()), opb.ExtractRequest(content=b"%PDF-1.4\n%%EOF"),
                  opb.ExtractRequest(content=png, options=opb.Options(languages="../../etc")),
                  opb.ExtractRequest(content=png, options=opb.Options(languages="xx+zz"))),
            *msgs(o, "SubmitJob", opb.SubmitJobRequest(), opb.SubmitJobRequest(contents=[b""]),
                  opb.SubmitJobRequest(contents=[b"x"] * 1000),
                  opb.SubmitJobRequest(contents=[png], options=opb.Options(languages="../../etc"))),
            *msgs(o, "GetJob", opb.GetJobRequest(), opb.GetJobRequest(job_id="abc:pages"),
                  opb.GetJobRequest(job_id="x" * 10_000), opb.GetJobRequest(job_id="*")),
            *msgs(o, "GetJobResult", opb.GetJobResultRequest(), opb.GetJobResultRequest(job_id="abc:pages"),
                  opb.GetJobResultRequest(job_id="*")),
        ],
    }
    return cases


def _brief(msg: Any) -> str:
    text = str(msg).replace("\n", " ")
    return text[:60] + ("…" if len(text) > 60 else "")


def run_grpc(targets: dict[str, str], cases: dict[str, list[tuple[str, str, GrpcCall]]], out: CorpusResult,
             timeout_s: float = 15.0) -> None:
    """Call each case with a deadline; count codes; name INTERNAL/UNKNOWN answers and calls that hit the deadline."""
    options = [("grpc.max_send_message_length", 64 * 1024 * 1024),
               ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    for service, calls in cases.items():
        with grpc.insecure_channel(targets[service], options=options) as channel:
            for method, what, call in calls:
                started = time.perf_counter()
                try:
                    call(channel, timeout_s)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as err:
                    code = err.code()  # type: ignore[attr-defined]
                took = time.perf_counter() - started
                out.grpc_slowest_s = max(out.grpc_slowest_s, took)
                out.grpc_codes[code.name] += 1
                named = f"{service}.{method} [{what}] -> {code.name} in {took:.1f} s"
                if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                    out.grpc_internal.append(named)
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    out.grpc_stalled.append(named)
                out.grpc_cases += 1


def iter_cases(cases: dict[str, list[tuple[str, str, GrpcCall]]]) -> Iterator[str]:
    """``service.method`` of every case (for the table's coverage line)."""
    for service, calls in cases.items():
        for method, _, _ in calls:
            yield f"{service}.{method}"
