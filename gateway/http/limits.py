"""Request body limits: a body over the limit is 413 before any route reads it, declared or chunked."""

from __future__ import annotations

from gateway.http.errors import ApiError, error_response


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is 413, declared or not (chunked uploads too)."""

    def __init__(self, app, limit: int, prefix_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.prefix_limits = prefix_limits or {}

    async def __call__(self, scope, receive, send):  # noqa: D102
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        limit = next((v for k, v in self.prefix_limits.items() if path.startswith(k)), self.limit)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = ApiError(413, "payload_too_large", f"body over {limit} bytes")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await error_response(too_big)(scope, receive, send)
        # Read the body up front (it is bounded by the limit), so an oversized stream is refused
        # before any route sees it; then replay it to the app.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message]), send)
            seen += len(message.get("body", b""))
            if seen > limit:
                return await error_response(too_big)(scope, receive, send)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}],
                                      receive), send)


def _replay(messages: list[dict], then=None):
    """An ASGI receive that returns ``messages`` first, then defers to ``then`` (or waits)."""
    queue = list(messages)

    async def receive():
        if queue:
            return queue.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive
