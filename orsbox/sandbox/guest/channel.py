"""The host side of the guest protocol: one asyncio connection per sandbox.

The guest (`inside/`) runs inside the sandbox with its stdin and stdout on a socket
the backend hands over (Docker: the raw socket of an attach). We give that socket to
the event loop as a plain `asyncio.Protocol`, so an idle sandbox costs a socket and a
few objects, not a thread, and a request costs no backend API call. stdout carries the
guest's frames (see `inside/__init__.py` for the format); a backend whose transport also
carries stderr (Docker multiplexes both on one socket) passes a `Demux` that splits
them, and stderr, the guest's diagnostics, is logged. A plain byte stream needs none.

Requests carry ids, so several can be in flight at once (a shell call while files are
read); replies are matched by id. When the socket closes every pending and later request
fails with `ChannelClosed`, which the sandbox turns into `SandboxGone`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import socket
import struct
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

log = logging.getLogger("orsbox.sandbox.agent")  # the name operators filter on; kept

GUEST_HEAD = struct.Struct(">II")
# Before every request: a guest asleep (`inside/sleep.py`, a bash waiting for one byte)
# wakes on it, an awake one skips it. So a sleeping guest needs no message of its own.
WAKE = b"\n"

Header = dict[str, Any]


class Demux(Protocol):
    """Splits a transport's bytes into (stdout chunks, stderr chunks)."""

    def feed(self, data: bytes) -> tuple[list[bytes], list[bytes]]: ...


class ChannelClosed(Exception):
    """The guest's socket closed: the container or the guest is gone."""


async def _until_done(send: Coroutine[Any, Any, None], future: asyncio.Future[Any]) -> None:
    """Run `send` until it finishes or `future` is done (its timer expired, the channel
    closed), whichever comes first."""
    task = asyncio.ensure_future(send)
    try:
        await asyncio.wait({task, future}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # the frame is written whole or not at all: cancelling cannot cut it
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        task.result()


def encode_frame(header: Header, payload: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return GUEST_HEAD.pack(len(raw), len(payload)) + raw + payload


class FrameReader:
    """Turns the guest's byte stream (after `demux`, when the transport needs one) into
    guest frames.

    Buffers hold at most one incomplete frame; a big reply (a 50 MB file) is cut out
    of the buffer once, when its last byte has arrived."""

    def __init__(self, demux: Demux | None = None) -> None:
        self._demux = demux
        self._guest = bytearray()

    def feed(self, data: bytes) -> tuple[list[tuple[Header, bytes]], list[bytes]]:
        """Return the complete guest frames and stderr chunks found so far."""
        out, errors = self._demux.feed(data) if self._demux is not None else ([data], [])
        frames: list[tuple[Header, bytes]] = []
        for chunk in out:
            self._guest += chunk
            frames.extend(self._guest_frames())
        return frames, errors

    def take_leftover(self) -> bytes:
        """What came on stdout and never made a frame, emptied: at the end, a message
        from something other than the guest (Docker writes why an exec could not start
        on the exec's stdout)."""
        leftover = bytes(self._guest)
        self._guest.clear()
        return leftover

    def _guest_frames(self) -> list[tuple[Header, bytes]]:
        out = []
        while len(self._guest) >= GUEST_HEAD.size:
            hlen, plen = GUEST_HEAD.unpack_from(self._guest)
            start = GUEST_HEAD.size
            end = start + hlen + plen
            if len(self._guest) < end:
                break
            header = json.loads(bytes(self._guest[start : start + hlen]))
            payload = bytes(self._guest[start + hlen : end])
            del self._guest[:end]
            out.append((header, payload))
        return out


def _expire(future: asyncio.Future[tuple[Header, bytes]]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class GuestChannel(asyncio.Protocol):
    """Request/reply over the exec socket. Use `connect` to make one."""

    def __init__(
        self, name: str, on_lost: Callable[[], None] | None = None, demux: Demux | None = None
    ) -> None:
        self.name = name
        self._on_lost = on_lost
        self._reader = FrameReader(demux)
        self._pending: dict[int, asyncio.Future[tuple[Header, bytes]]] = {}
        self._ids = itertools.count(1)
        self._transport: asyncio.Transport | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._write_lock = asyncio.Lock()
        self.closed = asyncio.Event()
        # The last lines the other side wrote to stderr: why a guest that never started
        # ended (Docker: "unable to find user ..."), for the error that says so.
        self.last_words: collections.deque[str] = collections.deque(maxlen=5)

    @classmethod
    async def connect(
        cls,
        sock: socket.socket,
        name: str,
        on_lost: Callable[[], None] | None = None,
        demux: Demux | None = None,
    ) -> GuestChannel:
        loop = asyncio.get_running_loop()
        channel = cls(name, on_lost, demux)
        if sock.family == socket.AF_UNIX:
            await loop.create_unix_connection(lambda: channel, sock=sock)
        else:
            await loop.create_connection(lambda: channel, sock=sock)
        return channel

    @property
    def open(self) -> bool:
        return not self.closed.is_set()

    async def request(
        self, header: Header, payload: bytes = b"", timeout_s: float | None = None
    ) -> tuple[Header, bytes]:
        """Send one request and wait for its reply. Raises `ChannelClosed`, or
        `TimeoutError` after `timeout_s`, sending included (a plain timer: a cancel
        scope per request costs more than the rest of a shell round trip on the host)."""
        if not self.open or self._transport is None:
            raise ChannelClosed(self.name)
        rid = next(self._ids)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[rid] = future
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, future)
        try:
            frame = WAKE + encode_frame({**header, "id": rid}, payload)
            if self._write_lock.locked() or not self._writable.is_set():
                # Only here can sending wait: on a peer that stopped reading. Bounded
                # by the same timer: the wait ends when the reply future does.
                await _until_done(self._send(frame), future)
            else:
                await self._send(frame)
            return await future
        finally:
            self._pending.pop(rid, None)
            if timer is not None:
                timer.cancel()

    async def send_raw(self, data: bytes) -> None:
        """Bytes outside the framing (the guest's payload, before the guest runs)."""
        await self._send(data)

    async def _send(self, frame: bytes) -> None:
        # One writer at a time, and wait while the socket buffer is full, so a 50 MB
        # write_file is sent in order and is never buffered twice.
        async with self._write_lock:
            await self._writable.wait()
            if self._transport is None or self._transport.is_closing():
                raise ChannelClosed(self.name)
            self._transport.write(frame)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close now, dropping unsent data: `close` first flushes it, which never ends
        on a peer that stopped reading."""
        if self._transport is not None:
            self._transport.abort()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # duck-typed: uvloop's stream transports are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        frames, errors = self._reader.feed(data)
        for chunk in errors:
            for line in chunk.decode(errors="replace").splitlines():
                log.info("%s: %s", self.name, line)
                self.last_words.append(line.strip())
        for header, payload in frames:
            future = self._pending.get(header.get("id", -1))
            if future is not None and not future.done():
                future.set_result((header, payload))

    def eof_received(self) -> bool:
        # The guest's stdout ended, so nothing more will be answered: drop what is
        # unsent (a start that failed, like `docker exec -u nobody-here`, never reads
        # its stdin, and a flushing close would hold every pending request to its
        # timeout) and fail the pending requests now.
        self._keep_last_words()  # before a send can see the transport closing
        if self._transport is not None:
            self._transport.abort()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._keep_last_words()
        self.closed.set()
        self._writable.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosed(self.name))
        if self._on_lost is not None:
            self._on_lost()

    def _keep_last_words(self) -> None:
        text = self._reader.take_leftover().decode(errors="replace")
        self.last_words.extend(line.strip() for line in text.splitlines() if line.isprintable())

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
