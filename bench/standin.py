"""Scripted stand-ins for OpenAI-compatible servers (chat with SSE, vision), shared by tests and benches.

They are not models. They serve what a real server cannot here: injecting failures on demand
(stalls, broken streams, schema-breaking answers), answering instantly so a bench can measure the
mesh's own overhead without an LLM's timing noise, and standing in for a VLM, whose weights cannot be
obtained on these machines.
"""

from __future__ import annotations

from collections.abc import Callable


class _LoopbackServer:
    """A threaded HTTP server on a free loopback port serving ``handler``."""

    def _serve(self, handler, port: int = 0) -> None:
        import http.server
        import threading

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # A short poll: close() waits for it, often from an event loop (a stand-in stops within ~50 ms).
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def minimal_instance(schema: dict) -> object:
    """The smallest value that satisfies a JSON schema of the kinds the mesh sends.

    Objects (their required properties), arrays (their minimum items), enums, strings with a minimum
    length, bounded numbers: what a model held to the schema could write.
    """
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: minimal_instance(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [minimal_instance(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "가" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def schema_or(text: str):
    """A ``ChatStandIn`` reply: the smallest valid JSON when the request holds a schema, else ``text``."""
    import json

    def reply(body: dict) -> dict:
        fmt = body.get("response_format") or {}
        schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
        return {"chunks": [json.dumps(minimal_instance(schema), ensure_ascii=False) if schema else text]}

    return reply


class ChatStandIn(_LoopbackServer):
    """A local stand-in for an OpenAI-compatible chat server.

    For failures a real server cannot be made to show on demand (stalls, broken streams,
    schema-breaking answers) and for overhead measurements. Not a model: each request takes the
    next scripted behaviour (the last one repeats):

    ``{"chunks": ["안", "녕"], "first_delay_s": 0, "stall_after": None, "break_after": None,
    "status": 200}`` -- stream ``chunks`` as SSE deltas; wait ``first_delay_s`` before the first;
    after ``stall_after`` chunks hang (until the client goes away); after ``break_after`` chunks
    close the connection without ``[DONE]``; with ``no_finish`` end with ``[DONE]`` but no finish reason
    (how a server that interrupts a stream for another request ends it). ``script`` may instead be a
    function of the request body returning the behaviour (a reply that depends on the prompt).
    """

    def __init__(self, script: list[dict] | Callable[[dict], dict], port: int = 0) -> None:
        import http.server

        self.reply = script if callable(script) else None
        self.script: list[dict] = [] if callable(script) else script
        self.requests: list[dict] = []
        self.closed_early = 0
        self.served_tokens = 0  # prompt + completion tokens of every answer it finished (what its usage said)
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - GET /v1/models, as every OpenAI-compatible server answers
                import json

                if not self.path.rstrip("/").endswith("/models"):
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({"object": "list", "data": [{"id": "standin", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):  # noqa: N802
                import json
                import time

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append(body)
                plan = (standin.reply(body) if standin.reply is not None
                        else standin.script[min(len(standin.requests), len(standin.script)) - 1])
                if plan.get("status", 200) != 200:
                    self.send_response(plan["status"])
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted failure"}')
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    time.sleep(plan.get("first_delay_s", 0))
                    for i, text in enumerate(plan.get("chunks", ["네"])):
                        if plan.get("stall_after") is not None and i >= plan["stall_after"]:
                            for _ in range(600):  # hang; a cancelled client shows as a broken pipe
                                time.sleep(0.05)
                                self.wfile.write(b": keep-alive\n\n")
                                self.wfile.flush()
                        if plan.get("break_after") is not None and i >= plan["break_after"]:
                            return
                        event = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                        self.wfile.flush()
                    end = {"choices": [{"index": 0, "delta": {},
                                        "finish_reason": None if plan.get("no_finish")
                                        else plan.get("finish_reason", "stop")}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": len(plan.get("chunks", ["네"]))}}
                    self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    self.wfile.flush()
                    standin.served_tokens += end["usage"]["prompt_tokens"] + end["usage"]["completion_tokens"]
                except (BrokenPipeError, ConnectionResetError):
                    standin.closed_early += 1

        self._serve(Handler, port)


class VisionStandIn(_LoopbackServer):
    """A local stand-in for a VLM server speaking the OpenAI vision chat protocol.

    No VLM weights can be obtained on these machines, so this is not a model: it checks the request
    has the protocol's shape (a text part and a base64 PNG data URL), decodes the image, and answers
    with a transcription naming the image's size. ``stall_s`` makes it hang (timeout tests).
    """

    def __init__(self) -> None:
        import http.server

        self.requests: list[dict] = []
        self.stall_s = 0.0
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                import base64
                import io
                import json
                import time

                from PIL import Image

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append(body)
                if standin.stall_s:
                    time.sleep(standin.stall_s)
                try:
                    assert self.path == "/v1/chat/completions", self.path
                    parts = body["messages"][0]["content"]
                    text = next(p for p in parts if p["type"] == "text")["text"]
                    url = next(p for p in parts if p["type"] == "image_url")["image_url"]["url"]
                    assert text and url.startswith("data:image/png;base64,")
                    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
                    answer = f"스탠드인 판독 {img.width}x{img.height}\n둘째 줄"
                    status, out = 200, {"id": "standin", "object": "chat.completion", "model": body["model"],
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": answer}}]}
                except (AssertionError, KeyError, StopIteration, OSError) as err:
                    status, out = 400, {"error": {"message": f"bad request: {err!r}"}}
                data = json.dumps(out, ensure_ascii=False).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler)


class OtlpSink(_LoopbackServer):
    """A local OTLP/HTTP receiver (``POST /v1/traces``, protobuf) that keeps the spans it is sent.

    Stands in for a trace backend (Jaeger, an OpenTelemetry Collector, Phoenix) in tests and in the
    tracing-cost bench; it decodes real OTLP requests with the official protobuf types. With
    ``keep=False`` it only counts spans (the bench's sink must not grow).
    """

    def __init__(self, keep: bool = True, port: int = 0) -> None:
        import http.server
        import threading

        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        self.spans: list[dict] = []
        self.count = 0
        self.keep = keep
        self._lock = threading.Lock()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                sink._collect(request)
                out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self._serve(Handler, port)
        self.endpoint = self.url.removesuffix("/v1")

    def _collect(self, request) -> None:
        from google.protobuf.json_format import MessageToDict

        for resource in request.resource_spans:
            service = next((a.value.string_value for a in resource.resource.attributes if a.key == "service.name"),
                           "")
            for scope in resource.scope_spans:
                with self._lock:
                    self.count += len(scope.spans)
                    if not self.keep:
                        continue
                    for span in scope.spans:
                        self.spans.append({
                            "service": service, "name": span.name, "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(), "parent_id": span.parent_span_id.hex(),
                            "kind": span.kind, "links": [link.trace_id.hex() for link in span.links],
                            "attributes": {a.key: _any_value(a.value, MessageToDict) for a in span.attributes}})

    def trace(self, trace_id: str) -> list[dict]:
        """The spans received so far for ``trace_id``."""
        with self._lock:
            return [s for s in self.spans if s["trace_id"] == trace_id]


def _any_value(value, to_dict):
    """An OTLP AnyValue as a Python value (scalars as such, arrays and maps as dicts)."""
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    return to_dict(value) if kind else None


class ToolBackendStandIn(_LoopbackServer):
    """A local stand-in for an operator's backend tool (gateway/assistant/backend_tools.py): not a real service.

    POSTs ``{"tool", "arguments", "caller", "key_id"}`` are recorded in ``requests`` and answered by path, for
    the failures a real backend cannot be made to show on demand: ``/redirect`` answers 302 (to a metadata
    address), ``/big`` a ~10 MB JSON array, ``/slow`` after ``slow_s``; any other path one posting echoing
    the arguments and the caller. With ``secret``, it checks the mesh's signature as a backend would
    (the verifier of docs/features/assistant.md): a request not signed with it is a 401, and not recorded.
    ``base`` is its root URL.
    """

    def __init__(self, slow_s: float = 2.0, secret: bytes | None = None) -> None:
        import http.server
        import json
        import time

        self.requests: list[dict] = []
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                import hashlib
                import hmac

                raw = self.rfile.read(int(self.headers["Content-Length"]))
                if secret is not None:  # the ten-line verifier of docs/features/assistant.md
                    ts = self.headers.get("X-Mesh-Timestamp", "0")
                    mac = hmac.new(secret, ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
                    fresh = ts.isdigit() and abs(time.time() - int(ts)) <= 300
                    if not (fresh and hmac.compare_digest(f"v1={mac}", self.headers.get("X-Mesh-Signature", ""))):
                        self.send_response(401)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                body = json.loads(raw)
                standin.requests.append({"path": self.path, **body})
                if self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest")
                    self.end_headers()
                    return
                if self.path == "/slow":
                    time.sleep(slow_s)
                args = body.get("arguments") or {}
                payload = b"[" + b"0," * (5 << 20) + b"0]" if self.path == "/big" else json.dumps(
                    {"postings": [{"company": args.get("company") or "한빛소프트웨어", "role": args.get("role", ""),
                                   "location": args.get("location") or "판교", "caller": body.get("caller", "")}]},
                    ensure_ascii=False).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler)
        self.base = self.url.removesuffix("/v1")
