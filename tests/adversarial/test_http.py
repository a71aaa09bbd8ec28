"""Hostile HTTP clients on raw sockets: garbage, giant heads, requests that never end.
Each gets a clear status (400, 408, 431) or a closed connection, quickly, and the server
goes on serving everyone else with bounded memory.

Malformed JSON and oversized bodies (with and without Content-Length) are tested in
tests/test_http_protocol.py, wrong tokens in tests/test_access.py (see
tests/adversarial/__init__.py)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import PROTOCOL_ENVS
from tests.containers.test_container_tools import server_rss_kib
from tests.servers import LiveServer, start_server

READ_TIMEOUT_S = 2.0
MIB = 1024**2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        PROTOCOL_ENVS, tmp_path_factory.mktemp("http"), request_read_timeout_s=READ_TIMEOUT_S
    )
    yield live
    live.stop()


def connect(server: LiveServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def exchange(server: LiveServer, data: bytes) -> bytes:
    """Send `data`, read until the server closes. A server that closes mid-send (a
    reset, or a broken pipe when it closed first) counts as closed; what it answered
    before closing is still read."""
    with connect(server) as sock:
        answer = b""
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(data)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def status_of(answer: bytes) -> int | None:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


def healthy(server: LiveServer) -> bool:
    return httpx.get(f"{server.url}/health", timeout=2).json()["status"] == "ok"


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)),  # a TLS hello
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /\xff\xfe/tools HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
        b"POST /protocol/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
        b"POST /protocol/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    ],
    ids=["garbage", "tls", "version", "path", "nul", "length", "chunked", "two-lengths"],
)
def test_malformed_requests_are_400_and_closed(server: LiveServer, request_bytes: bytes) -> None:
    started = time.monotonic()
    assert status_of(exchange(server, request_bytes)) == 400
    assert time.monotonic() - started < 1 and healthy(server)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MIB + b"\r\n\r\n",
        b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(50_000)),
        b"GET /" + b"a" * (8 * MIB) + b" HTTP/1.1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nAuthorization: Bearer " + b"t" * (32 * MIB) + b"\r\n\r\n",
    ],
    ids=["header-line", "many-headers", "url", "token"],
)
def test_giant_request_heads_are_refused_in_bounded_memory(
    server: LiveServer, request_bytes: bytes
) -> None:
    rss_before = server_rss_kib(server)
    started = time.monotonic()
    answer = exchange(server, request_bytes)
    assert status_of(answer) in (None, 400, 431), answer[:200]  # None: reset while sending
    assert time.monotonic() - started < 5 and healthy(server)
    assert (server_rss_kib(server) - rss_before) / 1024 < 32


def test_slow_and_silent_clients_are_cut_off_and_block_no_one(server: LiveServer) -> None:
    partial = [connect(server) for _ in range(100)]
    for sock in partial[:50]:  # half send part of a head, half nothing at all
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    with connect(server) as slow_body:  # a body that never comes
        slow_body.sendall(
            b"POST /protocol/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        )
        started = time.monotonic()
        assert healthy(server) and time.monotonic() - started < 1  # others are served meanwhile
        assert slow_body.recv(65536) == b""  # closed: the app had the request, so no answer
        assert time.monotonic() - started < READ_TIMEOUT_S + 3
    answers = []
    for sock in partial:
        with sock:
            answers.append(status_of(sock.recv(65536)))
    assert answers == [408] * 100
    assert time.monotonic() - started < READ_TIMEOUT_S + 5
    assert "internal error" not in server.log()
