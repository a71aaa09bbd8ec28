"""A lean HTTP/1.1 keep-alive client for measuring, so the client is not what is measured.

httpx spends about as much CPU per request as the server's whole hot path (~1 ms), which
on 2 shared cores hides what the server costs. This client writes one pre-encoded
request and reads the answer (Content-Length or chunked, which is how an SSE stream
ends) on one asyncio connection: a few tens of microseconds per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@dataclass
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_result(self) -> Any:
        """The ORS result of a call stream: its `chunk`... `end` data, joined and parsed."""
        text = self.body.decode()
        pieces = []
        for event in text.split("\r\n\r\n"):
            name, _, data = event.partition("\r\ndata: ")
            if name in ("event: chunk", "event: end"):
                pieces.append(data)
        if not pieces:
            raise RuntimeError(f"no result in stream (status {self.status}): {text[:300]}")
        return json.loads("".join(pieces))


class Connection:
    """One keep-alive connection; one request at a time. `await Connection.open(url)`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self.reader = reader
        self.writer = writer
        self.host = host

    @classmethod
    async def open(cls, url: str) -> Connection:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=2**20)
        return cls(reader, writer, f"{parts.hostname}:{parts.port}")

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        payload = b"" if body is None else json.dumps(body).encode()
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if method != "GET":
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        return await self._read_response()

    async def _read_response(self) -> Response:
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        status = int(status_line.split()[1])
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = await self._read_chunked()
        else:
            body = await self.reader.read()
        return Response(status, body)

    async def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


async def metric_samples(url: str) -> list[Sample]:
    """Every sample of the server's `/metrics` now; raises if it does not answer 200."""
    conn = await Connection.open(url)
    try:
        answer = await conn.request("GET", "/metrics")
    finally:
        await conn.close()
    if answer.status != 200:
        raise RuntimeError(f"/metrics answered {answer.status}: {answer.body[:200]!r}")
    return [
        sample
        for family in text_string_to_metric_families(answer.body.decode())
        for sample in family.samples
    ]
