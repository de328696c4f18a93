"""Scripted stand-ins for OpenAI-compatible servers (chat with SSE, vision), shared by tests and benches.

They are not models. They serve what a real server cannot here: injecting failures on demand
(stalls, broken streams, schema-breaking answers), answering instantly so a bench can measure the
mesh's own overhead without an LLM's timing noise, and standing in for a VLM, whose weights cannot be
obtained on these machines.
"""

from __future__ import annotations


class _LoopbackServer:
    """A threaded HTTP server on a free loopback port serving ``handler``."""

    def _serve(self, handler, port: int = 0) -> None:
        import http.server
        import threading

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class ChatStandIn(_LoopbackServer):
    """A local stand-in for an OpenAI-compatible chat server.

    For failures a real server cannot be made to show on demand (stalls, broken streams,
    schema-breaking answers) and for overhead measurements. Not a model: each request takes the
    next scripted behaviour (the last one repeats):

    ``{"chunks": ["안", "녕"], "first_delay_s": 0, "stall_after": None, "break_after": None,
    "status": 200}`` -- stream ``chunks`` as SSE deltas; wait ``first_delay_s`` before the first;
    after ``stall_after`` chunks hang (until the client goes away); after ``break_after`` chunks
    close the connection without ``[DONE]``; with ``no_finish`` end with ``[DONE]`` but no finish reason
    (how a server that interrupts a stream for another request ends it).
    """

    def __init__(self, script: list[dict], port: int = 0) -> None:
        import http.server

        self.script = script
        self.requests: list[dict] = []
        self.closed_early = 0
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
                plan = standin.script[min(len(standin.requests), len(standin.script)) - 1]
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
                                        "finish_reason": None if plan.get("no_finish") else "stop"}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": len(plan.get("chunks", ["네"]))}}
                    self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    self.wfile.flush()
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
