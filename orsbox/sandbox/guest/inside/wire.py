"""The guest's side of the framing (the package docstring), and the plain reads and
writes of non-blocking descriptors the loop is built on."""

import errno
import os
import select
import struct
import sys

from .json_codec import dumps, loads

HEAD = struct.Struct(">II")
WAKE = b"\n"  # before each of the host's frames (`sleep.py`)
READ_CHUNK = 65536
ONE_WRITE = 1 << 18  # a reply with a smaller payload goes out in one write (one docker frame)


def log(message):
    sys.stderr.write(f"orsbox-guest: {message}\n")
    sys.stderr.flush()


def read_ready(fd):
    """One read of a non-blocking descriptor the selector named: bytes, b"" at EOF (or
    on an error, which ends the stream the same way), None if it had nothing after all.
    At most READ_CHUNK: os.read allocates the full size it is asked for."""
    try:
        return os.read(fd, READ_CHUNK)
    except OSError as e:
        return None if e.errno == errno.EAGAIN else b""


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def send_frame(fd, header, payload=b""):
    raw = dumps(header).encode()
    if len(payload) < ONE_WRITE:
        write_all(fd, HEAD.pack(len(raw), len(payload)) + raw + payload)
        return
    write_all(fd, HEAD.pack(len(raw), len(payload)) + raw)
    write_all(fd, payload)


class FrameBuffer:
    """Bytes read from the host, cut into (header, payload) frames as they complete."""

    def __init__(self):
        self.data = bytearray()

    def feed(self, data):
        self.data += data
        frames = []
        while True:
            # the host's wake byte before each frame (`sleep.py`); a frame never starts
            # with it: that would be a header over 160 MiB
            while self.data[:1] == WAKE:
                del self.data[:1]
            if len(self.data) < HEAD.size:
                break
            hlen, plen = HEAD.unpack_from(self.data)
            end = HEAD.size + hlen + plen
            if len(self.data) < end:
                break
            header = loads(bytes(self.data[HEAD.size : HEAD.size + hlen]).decode())
            payload = bytes(self.data[HEAD.size + hlen : end])
            del self.data[:end]
            frames.append((header, payload))
        return frames
