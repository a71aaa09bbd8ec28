"""Uvicorn's httptools protocol with the two bounds it lacks: request-head size and time.

Uvicorn reads a request head of any size (a 64 MB header line was accepted, and took
40 s of parsing) and waits forever for a head or body that never completes, so a few
hundred slow clients ("slowloris") hold as many sockets for as long as they like. Here:

* a request line plus headers over `max_header_bytes` gets 431 and the connection
  closes (a head that never ends, once that much of it has arrived);
* a request must arrive whole (head and body) within `read_timeout_s` of its first byte,
  and a new connection must start one within that time; otherwise 408 (or, once the
  app has the request, a plain close, which the app sees as a disconnect).

Between requests uvicorn's own keep-alive timeout applies. The hooks are uvicorn's
parser callbacks (`on_message_begin` ... `on_message_complete`), so a uvicorn upgrade
that renames them fails `tests/adversarial/test_http.py`, not silently.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024
READ_TIMEOUT_S = 30.0


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    max_header_bytes = MAX_HEADER_BYTES
    read_timeout_s = READ_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0  # of the request line and headers parsed so far
        self._unparsed_head_bytes = 0  # received while a head is incomplete
        self._in_head = True
        self._answered = False
        self._deadline: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        # httptools holds a header's bytes until the header ends, so a head that never
        # ends is bounded here, by what arrives before it does (give or take one read)
        if self._in_head:
            self._unparsed_head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._unparsed_head_bytes > self.max_header_bytes:
            self._too_large()

    # -- the read deadline

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's own, which narrows asyncio's BaseTransport
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head, self._unparsed_head_bytes = True, 0  # the next request's head
        super().on_message_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _read_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # no app has the request
            self._answer(408, f"request not received within {self.read_timeout_s:g}s")
        else:
            self.transport.close()

    # -- the head size

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            self._too_large()
            raise ValueError("request head too large")  # stops the parser

    def _too_large(self) -> None:
        if not self._answered and not self.transport.is_closing():
            self._answer(431, f"request line and headers exceed {self.max_header_bytes} bytes")

    # -- answers outside the app

    def _answer(self, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self._answered = True
        self.transport.write(head.encode() + body)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if not self._answered:  # the parser error we caused has had its answer
            super().send_400_response(msg)


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large"}


def guarded_protocol(max_header_bytes: int, read_timeout_s: float) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (`http=`), with these bounds."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"max_header_bytes": max_header_bytes, "read_timeout_s": read_timeout_s},
    )
