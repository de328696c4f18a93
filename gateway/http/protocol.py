"""The HTTP/1.1 server protocol: uvicorn's h11 protocol plus a header-read timeout.

uvicorn times out idle keep-alive connections but not a connection that never finishes sending its
request headers, so half-open connections (a slow client, or a slowloris attack) used to stay open
for good: 1,100 of them did. Here a connection gets ``header_timeout_s`` to deliver each request's
headers, or it is closed.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request headers do not arrive in time."""

    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late, self.cycle)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self, cycle_when_armed: object) -> None:
        if self.cycle is cycle_when_armed and not self.transport.is_closing():  # still no new request
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # noqa: D102
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:  # noqa: D102
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers arrived
            self._disarm()

    def on_response_complete(self) -> None:  # noqa: D102
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers get the same time

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self._disarm()
        super().connection_lost(exc)


def protocol_with_timeout(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with this header timeout."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": header_timeout_s})
